package webhooks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// keepAnswer is how much of an endpoint's answer is kept for the deliveries list.
const keepAnswer = 256

// Run delivers due events until ctx ends: it looks at start, every Poll, when woken, and when an attempt
// finishes. At most Workers attempts are in flight on this instance, and at most PerEndpoint to one
// endpoint, so a slow or dead endpoint holds two workers at most and never delays another account's
// events. Stopping waits for the attempts in flight (each bounded by Timeout); unclaimed deliveries stay
// for the next start or another instance.
func (s *Service) Run(ctx context.Context) error {
	var (
		mu     sync.Mutex
		busy   = map[string]int{} // attempts in flight per endpoint
		flight int
		wg     sync.WaitGroup
	)
	lastPrune := time.Time{}
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		mu.Lock()
		free := s.cfg.Workers - flight
		inFlight := maps.Clone(busy)
		mu.Unlock()
		if free > 0 {
			ds, err := s.claim(ctx, free, inFlight)
			if err != nil && ctx.Err() == nil {
				s.log.Error("claim webhook deliveries", "err", err)
			}
			for _, d := range ds {
				mu.Lock()
				busy[d.EndpointID]++
				flight++
				mu.Unlock()
				wg.Go(func() {
					s.attempt(ctx, d)
					mu.Lock()
					if busy[d.EndpointID]--; busy[d.EndpointID] == 0 {
						delete(busy, d.EndpointID)
					}
					flight--
					mu.Unlock()
					select {
					case s.freed <- struct{}{}:
					default:
					}
				})
			}
		}
		if time.Since(lastPrune) > time.Hour {
			s.prune(ctx)
			lastPrune = time.Now()
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-s.wake:
		case <-s.freed:
		case <-tick.C:
		}
	}
}

// claim leases up to n due deliveries, soonest first, so that no endpoint has more than PerEndpoint
// attempts in flight from this instance counting those in busy. Candidates are read first (an idle
// outbox never takes SQLite's writer); the lease is a guarded UPDATE, so two instances never claim one
// delivery.
func (s *Service) claim(ctx context.Context, n int, busy map[string]int) ([]models.WebhookDelivery, error) {
	now := s.now()
	q := `SELECT id, endpoint_id FROM (
		SELECT d.id, d.endpoint_id, d.next_attempt_at, ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.next_attempt_at, d.id) AS rn
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ? AND (d.lease_until IS NULL OR d.lease_until < ?) AND e.enabled = ?`
	args := []any{now, now, true}
	var full []string
	for ep, k := range busy {
		if k >= s.cfg.PerEndpoint {
			full = append(full, ep)
		}
	}
	if len(full) > 0 {
		q += ` AND d.endpoint_id NOT IN ?`
		args = append(args, full)
	}
	q += `) due WHERE rn <= ? ORDER BY next_attempt_at, id LIMIT ?`
	args = append(args, s.cfg.PerEndpoint, n)
	var rows []struct {
		ID         int64
		EndpointID string
	}
	if err := s.db.R.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("look for due webhook deliveries: %w", err)
	}
	var cand []int64
	taken := maps.Clone(busy)
	for _, r := range rows {
		if taken[r.EndpointID] < s.cfg.PerEndpoint {
			taken[r.EndpointID]++
			cand = append(cand, r.ID)
		}
	}
	if len(cand) == 0 {
		return nil, nil
	}
	var claimed []models.WebhookDelivery
	err := s.db.W.WithContext(ctx).Raw(`UPDATE webhook_deliveries SET lease_owner = ?, lease_until = ?, attempts = attempts + 1
		WHERE id IN ? AND next_attempt_at IS NOT NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?) RETURNING *`,
		s.cfg.Owner, now.Add(s.cfg.Lease), cand, now, now).Scan(&claimed).Error
	if err != nil {
		return nil, fmt.Errorf("claim webhook deliveries: %w", err)
	}
	return claimed, nil
}

// attempt makes one POST of a claimed delivery and records what came of it.
func (s *Service) attempt(ctx context.Context, d models.WebhookDelivery) {
	// The attempt in hand is finished even when the instance is stopping: its lease covers it.
	ctx = context.WithoutCancel(ctx)
	log := s.log.With("delivery", d.ID, "event", d.EventID, "endpoint", d.EndpointID)
	var ep models.WebhookEndpoint
	var ev models.WebhookEvent
	if err := s.db.R.WithContext(ctx).Where("id = ?", d.EndpointID).Take(&ep).Error; err != nil {
		log.Error("read webhook endpoint", "err", err)
		return // the lease runs out and it is tried again (or the endpoint was deleted, and the delivery with it)
	}
	if err := s.db.R.WithContext(ctx).Where("id = ?", d.EventID).Take(&ev).Error; err != nil {
		log.Error("read webhook event", "err", err)
		return
	}
	start := s.now()
	out := outcome{}
	secrets, err := s.signingSecrets(&ep, start)
	if err == nil {
		out = s.post(ctx, &ep, &ev, secrets, start)
	} else {
		log.Error("webhook not signed", "err", err)
		out.err = "the signing secret could not be opened (was APP_SECRET replaced without keeping the old value?); contact support"
	}
	out.latency = s.now().Sub(start)
	if err := s.recordAttempt(ctx, &d, start, out); err != nil {
		log.Error("record webhook attempt", "err", err)
	}
}

// outcome is what one attempt came to.
type outcome struct {
	status  int // 0: no answer
	head    string
	err     string // why there was no usable answer; "" when the endpoint answered
	latency time.Duration
}

func (o outcome) ok() bool { return o.err == "" && o.status >= 200 && o.status < 300 }

// post signs and sends the event's body. The timestamp is the attempt's, so a retry days later still
// passes the receivers' 5-minute freshness check; the id is the event's on every attempt.
func (s *Service) post(ctx context.Context, ep *models.WebhookEndpoint, ev *models.WebhookEvent, secrets []string, at time.Time) outcome {
	body := []byte(ev.Payload)
	sig, err := signature(secrets, ev.ID, at.Unix(), body)
	if err != nil {
		return outcome{err: "the event could not be signed; contact support"}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", ev.ID)
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", sig)
	pctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ans, err := s.fetch.Post(pctx, ep.URL, h, body, keepAnswer)
	if err != nil {
		if fe, ok := errors.AsType[*mediafetch.Error](err); ok {
			if fe.Code == "url_not_allowed" {
				return outcome{err: "refused: " + fe.Reason}
			}
			return outcome{err: fe.Reason}
		}
		return outcome{err: "no answer"}
	}
	return outcome{status: ans.Status, head: printable(ans.Head)}
}

// printable keeps the start of an answer for the console: valid UTF-8, no control characters.
func printable(b []byte) string {
	s := string(b)
	if !utf8.ValidString(s) {
		s = "(binary answer)"
	}
	s, _ = storetext.Clip(s, keepAnswer)
	return s
}

// recordAttempt writes the attempt and moves the delivery on: delivered; due again after the schedule's next
// wait; or given up after the last. A failure also extends the endpoint's failure streak, and a streak
// of DisableAfter disables the endpoint and e-mails the account's owner, in the same transaction.
func (s *Service) recordAttempt(ctx context.Context, d *models.WebhookDelivery, at time.Time, out outcome) error {
	now := s.now()
	msg, _ := storetext.Clip(out.err, 500)
	mailed := false
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE webhook_deliveries SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?", d.ID, s.cfg.Owner)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil // the lease ran out and another instance took it: its attempt counts, not ours
		}
		if err := tx.Create(&models.WebhookAttempt{DeliveryID: d.ID, EndpointID: d.EndpointID, Attempt: d.Attempts, At: at,
			Status: out.status, LatencyMS: int(out.latency.Milliseconds()), Response: out.head, Error: msg}).Error; err != nil {
			return err
		}
		if out.ok() {
			if err := tx.Exec("UPDATE webhook_deliveries SET delivered_at = ?, failed_at = NULL, next_attempt_at = NULL WHERE id = ?", now, d.ID).Error; err != nil {
				return err
			}
			return tx.Exec("UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL", d.EndpointID).Error
		}
		if d.Attempts > len(s.cfg.Schedule) {
			if err := tx.Exec("UPDATE webhook_deliveries SET failed_at = ?, next_attempt_at = NULL WHERE id = ?", now, d.ID).Error; err != nil {
				return err
			}
		} else if err := tx.Exec("UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ?", now.Add(s.cfg.Schedule[d.Attempts-1]), d.ID).Error; err != nil {
			return err
		}
		if err := tx.Exec("UPDATE webhook_endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL", at, d.EndpointID).Error; err != nil {
			return err
		}
		var cur models.WebhookEndpoint
		if err := tx.Where("id = ?", d.EndpointID).Take(&cur).Error; err != nil {
			return err
		}
		if !cur.Enabled || cur.FailingSince == nil || now.Sub(*cur.FailingSince) < s.cfg.DisableAfter {
			return nil
		}
		var err error
		mailed, err = s.disable(tx, &cur, now, msg, out.status)
		return err
	})
	if err != nil {
		return fmt.Errorf("record attempt %d of delivery %d: %w", d.Attempts, d.ID, err)
	}
	if mailed {
		s.mail.Wake()
	}
	return nil
}

// disable switches off an endpoint that has failed for DisableAfter and queues the e-mail to the
// account's owner (its first user) saying so, what the last attempt met, and how to switch it on.
func (s *Service) disable(tx *gorm.DB, ep *models.WebhookEndpoint, now time.Time, lastErr string, status int) (bool, error) {
	since := ep.FailingSince.Format("2 January 2006 15:04 MST")
	reason := "every delivery failed since " + since
	if err := tx.Exec("UPDATE webhook_endpoints SET enabled = ?, disabled_reason = ?, updated_at = ? WHERE id = ? AND enabled = ?",
		false, reason, now, ep.ID, true).Error; err != nil {
		return false, err
	}
	var owner models.User // the longest-standing current owner (docs/members.md)
	err := tx.Where("account_id = ? AND account_role = ? AND removed_at IS NULL", ep.AccountID, models.AccountOwner).Order("id").Take(&owner).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	last := lastErr
	if last == "" {
		last = "it answered " + strconv.Itoa(status)
	}
	why := fmt.Sprintf("Every delivery to %s has failed since %s; the last attempt: %s.", ep.URL, since, last)
	if err := s.mail.WebhookDisabled(tx, owner.Email, ep.URL, why, s.cfg.ConsoleURL+"/console/webhooks/"+ep.ID); err != nil {
		return false, err
	}
	return true, nil
}

// keepEvents is how long events, with their deliveries and attempts, are kept for the console.
const keepEvents = 30 * 24 * time.Hour

// prune deletes events older than keepEvents whose deliveries are all finished (their deliveries and
// attempts go with them).
func (s *Service) prune(ctx context.Context) {
	cutoff := s.now().Add(-keepEvents)
	err := s.db.W.WithContext(ctx).Exec(`DELETE FROM webhook_events WHERE created_at < ? AND NOT EXISTS
		(SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id AND d.next_attempt_at IS NOT NULL)`, cutoff).Error
	if err != nil && ctx.Err() == nil {
		s.log.Warn("prune webhook events", "err", err)
	}
}
