package webhooks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/queue"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// keepAnswer is how much of an endpoint's answer is kept for the deliveries list.
const keepAnswer = 256

// deliveryArgs is the job of one delivery: River runs its attempts and their retries on the schedule
// (docs/jobs.md, "Webhook deliveries"). The delivery row is the record the console shows.
type deliveryArgs struct {
	DeliveryID int64 `json:"delivery_id" river:"unique"`
	// Before is the attempts the delivery had when this job was queued (a resend's, or a delivery that
	// waited while its endpoint was off), so the schedule goes on from them.
	Before int `json:"before,omitempty"`
}

func (deliveryArgs) Kind() string { return "webhook_delivery" }

// pendingStates are the job states in which a delivery's job is still to run: one job at most per
// delivery in them, so a resend or a switch-on while a retry waits adds none.
var pendingStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// Account priorities. River claims jobs by priority before age: an account's first deliveries waiting
// go ahead of any account's backlog, so one account's flood queues behind everyone else's few.
const (
	priorityFew     = 1
	priorityBacklog = 3
)

// jobFor is the insert of a delivery's job.
func (s *Service) jobFor(deliveryID int64, before, priority int) river.InsertManyParams {
	return river.InsertManyParams{Args: deliveryArgs{DeliveryID: deliveryID, Before: before}, InsertOpts: &river.InsertOpts{
		Queue:       queue.Webhooks,
		MaxAttempts: max(1, len(s.cfg.Schedule)+1-before),
		Priority:    priority,
		UniqueOpts:  river.UniqueOpts{ByArgs: true, ByState: pendingStates},
	}}
}

// priorityOf is the priority of an account's next delivery: priorityFew while fewer than Backlog of its
// deliveries wait, priorityBacklog past that.
func (s *Service) priorityOf(tx *gorm.DB, accountID int64) (int, error) {
	var n int64
	err := tx.Raw(`SELECT COUNT(*) FROM (SELECT 1 FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE e.account_id = ? AND d.next_attempt_at IS NOT NULL LIMIT ?) waiting`, accountID, s.cfg.Backlog).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count the account's waiting webhook deliveries: %w", err)
	}
	if n >= int64(s.cfg.Backlog) {
		return priorityBacklog, nil
	}
	return priorityFew, nil
}

// deliveryWorker makes the attempts of deliveries.
type deliveryWorker struct {
	river.WorkerDefaults[deliveryArgs]
	s *Service
}

// NextRetry is the schedule: the wait after the delivery's n-th failed attempt (docs/webhooks.md#retries).
// An attempt the delivery has no record of was cut by a crash, not failed (River's rescuer asks too, for
// the job of an instance that died): it is made again at once.
func (w *deliveryWorker) NextRetry(job *river.Job[deliveryArgs]) time.Time {
	now := w.s.now()
	var d models.WebhookDelivery
	if err := w.s.db.R.Select("attempts").Where("id = ?", job.Args.DeliveryID).Take(&d).Error; err == nil &&
		d.Attempts < job.Args.Before+job.Attempt {
		return now
	}
	return now.Add(w.s.wait(job.Args.Before + job.Attempt))
}

// Timeout bounds a job: one attempt and its record, inside the lease.
func (w *deliveryWorker) Timeout(*river.Job[deliveryArgs]) time.Duration { return w.s.cfg.Lease }

func (w *deliveryWorker) Work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	return w.s.work(ctx, job)
}

// wait is the wait after the n-th failed attempt.
func (s *Service) wait(n int) time.Duration {
	return s.cfg.Schedule[min(max(n, 1), len(s.cfg.Schedule))-1]
}

// inFlight is this instance's attempts under way, by account and by endpoint, each with when it started:
// an account holds at most PerAccount of the queue's workers, an endpoint at most PerEndpoint, so a slow
// or dead endpoint — or an account's flood of them — never takes every worker (docs/webhooks.md, "Fair
// to every account").
type inFlight struct {
	mu         sync.Mutex
	byAccount  map[int64][]time.Time
	byEndpoint map[string][]time.Time
}

// take counts an attempt starting at now, or, when the account or the endpoint has its share under way,
// reports how long the oldest of those has run: about how long until one ends, the wait before trying
// again (short for an endpoint that answers quickly, long for one that holds every request).
func (f *inFlight) take(s *Service, accountID int64, endpointID string, now time.Time) (ok bool, busyFor time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, e := f.byAccount[accountID], f.byEndpoint[endpointID]; len(a) >= s.cfg.PerAccount || len(e) >= s.cfg.PerEndpoint {
		full := a
		if len(e) >= s.cfg.PerEndpoint {
			full = e
		}
		return false, now.Sub(slices.MinFunc(full, time.Time.Compare))
	}
	f.byAccount[accountID] = append(f.byAccount[accountID], now)
	f.byEndpoint[endpointID] = append(f.byEndpoint[endpointID], now)
	return true, 0
}

func (f *inFlight) give(accountID int64, endpointID string, started time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	drop := func(ts []time.Time) []time.Time {
		if i := slices.IndexFunc(ts, started.Equal); i >= 0 {
			ts = slices.Delete(ts, i, i+1)
		}
		return ts
	}
	if f.byAccount[accountID] = drop(f.byAccount[accountID]); len(f.byAccount[accountID]) == 0 {
		delete(f.byAccount, accountID)
	}
	if f.byEndpoint[endpointID] = drop(f.byEndpoint[endpointID]); len(f.byEndpoint[endpointID]) == 0 {
		delete(f.byEndpoint, endpointID)
	}
}

// snooze is the wait of a job over its share: about as long as the attempts under way have run, at
// least 200 ms and at most an attempt's timeout, times one to two at random, so the waiting jobs of a
// flood come back spread out, and rarely.
func (s *Service) snooze(busyFor time.Duration) time.Duration {
	d := min(max(busyFor, 200*time.Millisecond), s.cfg.Timeout)
	return d + rand.N(d)
}

// work makes one attempt of a delivery and records it. A delivery that is gone (its endpoint deleted),
// done, or whose endpoint is off ends its job: switching the endpoint on queues its waiting deliveries
// again (SetEnabled). Over its account's or endpoint's share, the job waits (a snooze, which River does
// not count as an attempt).
func (s *Service) work(ctx context.Context, job *river.Job[deliveryArgs]) error {
	var d models.WebhookDelivery
	err := s.db.R.WithContext(ctx).Where("id = ?", job.Args.DeliveryID).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read webhook delivery %d: %w", job.Args.DeliveryID, err)
	}
	if d.NextAttemptAt == nil {
		return nil
	}
	var ep models.WebhookEndpoint
	if err := s.db.R.WithContext(ctx).Where("id = ?", d.EndpointID).Take(&ep).Error; errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("read webhook endpoint %s: %w", d.EndpointID, err)
	}
	if !ep.Enabled {
		return nil
	}
	began := s.now()
	if ok, busyFor := s.flight.take(s, ep.AccountID, ep.ID, began); !ok {
		return river.JobSnooze(s.snooze(busyFor))
	}
	defer s.flight.give(ep.AccountID, ep.ID, began)
	var ev models.WebhookEvent
	if err := s.db.R.WithContext(ctx).Where("id = ?", d.EventID).Take(&ev).Error; err != nil {
		return fmt.Errorf("read webhook event %s: %w", d.EventID, err)
	}
	// The attempt in hand is finished and recorded even when the instance is stopping.
	actx := context.WithoutCancel(ctx)
	start := s.now()
	out := outcome{}
	secrets, err := s.signingSecrets(&ep, start)
	if err == nil {
		out = s.post(actx, &ep, &ev, secrets, start)
	} else {
		s.log.Error("webhook not signed", "delivery", d.ID, "err", err)
		out.err = "the signing secret could not be opened (was APP_SECRET replaced without keeping the old value?); contact support"
	}
	out.latency = s.now().Sub(start)
	last := d.Attempts+1 > len(s.cfg.Schedule) || job.Attempt >= job.MaxAttempts
	if err := s.recordAttempt(actx, job, &d, start, out, last); err != nil {
		return err
	}
	if out.ok() || last {
		return nil
	}
	// River retries after NextRetry's wait; the error is the job's record of the attempt.
	return fmt.Errorf("attempt %d: %s", d.Attempts+1, out.summary())
}

// outcome is what one attempt came to.
type outcome struct {
	status  int // 0: no answer
	head    string
	err     string // why there was no usable answer; "" when the endpoint answered
	latency time.Duration
}

func (o outcome) ok() bool { return o.err == "" && o.status >= 200 && o.status < 300 }

func (o outcome) summary() string {
	if o.err != "" {
		return o.err
	}
	return "answered " + strconv.Itoa(o.status)
}

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

// recordAttempt writes the attempt and moves the delivery on, in one transaction: delivered (and the job
// completed with it, so a crash never repeats a recorded success); due again after the schedule's next
// wait; or, after the last, given up. A failure also extends the endpoint's failure streak, and a streak
// of DisableAfter disables the endpoint and e-mails the account's owner, in the same transaction.
func (s *Service) recordAttempt(ctx context.Context, job *river.Job[deliveryArgs], d *models.WebhookDelivery, at time.Time, out outcome, last bool) error {
	now := s.now()
	msg, _ := storetext.Clip(out.err, 500)
	n := d.Attempts + 1
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&models.WebhookAttempt{DeliveryID: d.ID, EndpointID: d.EndpointID, Attempt: n, At: at,
			Status: out.status, LatencyMS: int(out.latency.Milliseconds()), Response: out.head, Error: msg}).Error; err != nil {
			return err
		}
		if out.ok() {
			if err := tx.Exec("UPDATE webhook_deliveries SET attempts = ?, delivered_at = ?, failed_at = NULL, next_attempt_at = NULL WHERE id = ?", n, now, d.ID).Error; err != nil {
				return err
			}
			if err := tx.Exec("UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ? AND failing_since IS NOT NULL", d.EndpointID).Error; err != nil {
				return err
			}
			return queue.CompleteTx(tx, job)
		}
		if last {
			if err := tx.Exec("UPDATE webhook_deliveries SET attempts = ?, failed_at = ?, next_attempt_at = NULL WHERE id = ?", n, now, d.ID).Error; err != nil {
				return err
			}
		} else if err := tx.Exec("UPDATE webhook_deliveries SET attempts = ?, next_attempt_at = ? WHERE id = ?", n, now.Add(s.wait(n)), d.ID).Error; err != nil {
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
		return s.disable(tx, &cur, now, msg, out.status)
	})
	if err != nil {
		return fmt.Errorf("record attempt %d of delivery %d: %w", n, d.ID, err)
	}
	return nil
}

// disable switches off an endpoint that has failed for DisableAfter and queues the e-mail to the
// account's owner (its first user) saying so, what the last attempt met, and how to switch it on.
func (s *Service) disable(tx *gorm.DB, ep *models.WebhookEndpoint, now time.Time, lastErr string, status int) error {
	since := ep.FailingSince.Format("2 January 2006 15:04 MST")
	reason := "every delivery failed since " + since
	if err := tx.Exec("UPDATE webhook_endpoints SET enabled = ?, disabled_reason = ?, updated_at = ? WHERE id = ? AND enabled = ?",
		false, reason, now, ep.ID, true).Error; err != nil {
		return err
	}
	var owner models.User // the longest-standing current owner (docs/members.md)
	err := tx.Where("account_id = ? AND account_role = ? AND removed_at IS NULL", ep.AccountID, models.AccountOwner).Order("id").Take(&owner).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	last := lastErr
	if last == "" {
		last = "it answered " + strconv.Itoa(status)
	}
	why := fmt.Sprintf("Every delivery to %s has failed since %s; the last attempt: %s.", ep.URL, since, last)
	return s.mail.WebhookDisabled(tx, owner.Email, ep.URL, why, s.cfg.ConsoleURL+"/console/webhooks/"+ep.ID)
}

// keepEvents is how long events, with their deliveries and attempts, are kept for the console.
const keepEvents = 30 * 24 * time.Hour

// pruneArgs is the hourly chore that deletes old events.
type pruneArgs struct{}

func (pruneArgs) Kind() string { return "webhook_prune" }

func (pruneArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queue.Chores} }

type pruneWorker struct {
	river.WorkerDefaults[pruneArgs]
	s *Service
}

// Work deletes events older than keepEvents whose deliveries are all finished (their deliveries and
// attempts go with them).
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[pruneArgs]) error {
	cutoff := w.s.now().Add(-keepEvents)
	err := w.s.db.W.WithContext(ctx).Exec(`DELETE FROM webhook_events WHERE created_at < ? AND NOT EXISTS
		(SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id AND d.next_attempt_at IS NOT NULL)`, cutoff).Error
	if err != nil {
		return fmt.Errorf("prune webhook events: %w", err)
	}
	return nil
}
