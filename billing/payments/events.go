package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/webhook"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/infra/db"
	"videogen/models"
)

// ErrBadSignature is returned for a webhook whose Stripe-Signature is missing, wrong, too old or dated
// ahead, or whose API version is not the one this build speaks (2023-10-16): nothing is recorded.
var ErrBadSignature = errors.New("the Stripe-Signature header does not verify")

// ErrInvalidEvent is returned for a signed webhook Stripe would never send: one without an event id, which
// could not be told from a replay (nor another id-less event from a replay of it). Nothing is recorded.
var ErrInvalidEvent = errors.New("the Stripe event has no id")

// signedAhead is how far in the future a signature's time may be. webhook.ConstructEvent refuses only
// signatures too old; one dated a day ahead — made with the secret by a wrong clock, or by someone who
// holds it — would stay replayable for that day. Stripe signs as it sends: minutes cover clock skew.
const signedAhead = 5 * time.Minute

// Events videogen acts on; docs/stripe.md says what each does to the ledger.
const (
	EvSessionCompleted    = "checkout.session.completed"
	EvSessionAsyncPaid    = "checkout.session.async_payment_succeeded"
	EvSessionAsyncFailed  = "checkout.session.async_payment_failed"
	EvSessionExpired      = "checkout.session.expired"
	EvChargeRefunded      = "charge.refunded"
	EvDisputeCreated      = "charge.dispute.created"
	EvDisputeClosed       = "charge.dispute.closed"
	EvPaymentIntentPaid   = "payment_intent.succeeded"
	EvPaymentIntentFailed = "payment_intent.payment_failed"
)

// HandledEvents lists the event types the webhook endpoint must be subscribed to.
var HandledEvents = []string{EvSessionCompleted, EvSessionAsyncPaid, EvSessionAsyncFailed, EvSessionExpired,
	EvChargeRefunded, EvDisputeCreated, EvDisputeClosed, EvPaymentIntentPaid, EvPaymentIntentFailed}

// Received is what became of one webhook delivery.
type Received struct {
	EventID   string
	Type      string
	Duplicate bool   // the event id was received before
	Outcome   string // processed, ignored, deferred (waits for its payment), pending (will be retried)
}

// Record verifies a webhook delivery and records the event by its id, with its job; Process then applies
// it. Once it is recorded the delivery succeeds whatever the processing does: an event that cannot be
// processed yet (its payment is not known yet, the database is slow) stays pending and its job tries it
// again, so Stripe never needs to. An error means the event was not recorded: Stripe must retry.
func (s *Service) Record(ctx context.Context, payload []byte, signature string) (*Received, error) {
	ev, err := webhook.ConstructEvent(payload, signature, s.cfg.WebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	if at, err := signedAt(signature); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	} else if at.After(now.Add(signedAhead)) {
		return nil, fmt.Errorf("%w: signed at %s, more than %s ahead of %s", ErrBadSignature, at.UTC().Format(time.RFC3339), signedAhead, now.Format(time.RFC3339))
	}
	if strings.TrimSpace(ev.ID) == "" {
		return nil, fmt.Errorf("%w (type %q)", ErrInvalidEvent, ev.Type)
	}
	row := models.StripeEvent{ID: ev.ID, Type: string(ev.Type), Payload: string(payload), State: models.EventPending,
		StripeCreated: time.Unix(ev.Created, 0).UTC(), ReceivedAt: now}
	duplicate := false
	err = s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return res.Error
		}
		if duplicate = res.RowsAffected == 0; duplicate {
			return nil
		}
		// The event's job, its retry path, takes it only if this delivery has not finished it by then.
		_, err := s.queue.InsertTx(tx, eventArgs{EventID: ev.ID}, &river.InsertOpts{ScheduledAt: now.Add(10 * time.Second)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("record Stripe event %s: %w", ev.ID, err)
	}
	return &Received{EventID: ev.ID, Type: string(ev.Type), Duplicate: duplicate, Outcome: "pending"}, nil
}

// signedAt reads the time a Stripe-Signature header was made at: its t= (the last one, as
// webhook.ConstructEvent reads it, which has verified the header by now).
func signedAt(header string) (time.Time, error) {
	var at time.Time
	found := false
	for _, pair := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(pair, "=")
		if k != "t" {
			continue
		}
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("signature time %q: %w", v, err)
		}
		at, found = time.Unix(sec, 0), true
	}
	if !found {
		return time.Time{}, errors.New("the signature has no time")
	}
	return at, nil
}

// Outcomes of processing an event.
const (
	outcomeProcessed = "processed"
	outcomeIgnored   = "ignored"
	outcomeDeferred  = "deferred"
	outcomeCredited  = "credited"
)

// errDefer says an event names a payment not known yet; it is tried again later.
var errDefer = errors.New("its payment is not known yet")

// ignoreError says an event is not ours to act on; it is recorded as ignored with the reason.
type ignoreError struct{ why string }

func (e ignoreError) Error() string { return e.why }

func ignore(format string, args ...any) error { return ignoreError{fmt.Sprintf(format, args...)} }

// effect applies an event inside the transaction that marks it processed, and says what it did.
type effect func(tx *gorm.DB) (note string, err error)

// ErrPanicked is returned by Process for an event whose processing panicked (a payload nothing here
// foresaw). The event stays pending and its job tries it again with backoff: the panic must not end the
// process, nor end it again each time the job meets the event.
var ErrPanicked = errors.New("processing the Stripe event panicked")

// Process applies a recorded event once: the transaction that moves it out of 'pending' is the one that
// applies it, so twenty deliveries at once, or the webhook and the event's job at once, apply it once.
func (s *Service) Process(ctx context.Context, eventID string) (outcome string, err error) {
	defer func() {
		if p := recover(); p != nil {
			outcome, err = "", s.recovered(ctx, eventID, p)
		}
	}()
	var row models.StripeEvent
	if err := s.db.R.WithContext(ctx).Where("id = ?", eventID).Take(&row).Error; err != nil {
		return "", fmt.Errorf("read Stripe event %s: %w", eventID, err)
	}
	if row.State != models.EventPending {
		return row.State, nil
	}
	var ev stripe.Event
	if err := json.Unmarshal([]byte(row.Payload), &ev); err != nil {
		return s.finish(ctx, &row, models.EventIgnored, "unreadable payload: "+err.Error(), nil)
	}
	var paid string // the PaymentIntent this event credits, if it does
	apply, err := s.effectOf(ctx, &ev, &paid)
	if err != nil {
		var ig ignoreError
		switch {
		case errors.As(err, &ig):
			return s.finish(ctx, &row, models.EventIgnored, ig.why, nil)
		case errors.Is(err, errDefer):
			return outcomeDeferred, s.deferEvent(ctx, &row, err.Error())
		}
		return "", s.retryLater(ctx, &row, err)
	}
	out, err := s.finish(ctx, &row, models.EventProcessed, "", apply)
	if err != nil && db.IsUniqueViolation(err) {
		// Another event about the same payment committed its credit between our reads and our write
		// (the unique index stopped the second credit): the second look sees it and does nothing.
		out, err = s.finish(ctx, &row, models.EventProcessed, "", apply)
	}
	// Events that waited for this payment (a refund that came first) apply now, not at their next try.
	if err == nil && out == outcomeCredited && paid != "" && ctx.Value(retryingKey{}) == nil {
		s.processWaiting(context.WithValue(ctx, retryingKey{}, true), paid)
	}
	return out, err
}

// recovered turns a panic while processing an event into ErrPanicked: logged with its stack for staff,
// and the event noted for a retry like any other failure. (A transaction it was in has been rolled back.)
func (s *Service) recovered(ctx context.Context, eventID string, p any) error {
	err := fmt.Errorf("%w: %v", ErrPanicked, p)
	s.log.Error("Stripe event processing panicked; it stays pending", "event", eventID, "panic", p, "stack", string(debug.Stack()))
	// The delivery's own time may be what ran out: reading the event back gets a moment of its own.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	var row models.StripeEvent
	if rerr := s.db.R.WithContext(rctx).Where("id = ?", eventID).Take(&row).Error; rerr != nil {
		return errors.Join(err, fmt.Errorf("read Stripe event %s: %w", eventID, rerr))
	}
	return s.retryLater(ctx, &row, err)
}

// finish marks the event and applies its effect in one transaction.
func (s *Service) finish(ctx context.Context, row *models.StripeEvent, state, note string, apply effect) (string, error) {
	now := s.now().UTC()
	outcome := state
	err := s.tx(ctx, func(tx *gorm.DB) error {
		// Claim the event first: a second delivery of it waits here for the first to commit, then finds
		// it no longer pending and touches nothing.
		res := tx.Exec("UPDATE stripe_events SET state = ?, processed_at = ? WHERE id = ? AND state = ?",
			state, now, row.ID, models.EventPending)
		if res.Error != nil {
			return fmt.Errorf("claim Stripe event %s: %w", row.ID, res.Error)
		}
		if res.RowsAffected == 0 {
			return errAlreadyDone
		}
		if apply != nil {
			n, err := apply(tx)
			var ig ignoreError
			switch {
			case errors.As(err, &ig):
				state, note, outcome = models.EventIgnored, ig.why, outcomeIgnored
			case err != nil:
				return err
			default:
				note = n
				if n == outcomeCredited {
					outcome = outcomeCredited
				}
			}
		}
		if err := tx.Exec("UPDATE stripe_events SET state = ?, note = ? WHERE id = ?", state, note, row.ID).Error; err != nil {
			return fmt.Errorf("mark Stripe event %s %s: %w", row.ID, state, err)
		}
		return nil
	})
	switch {
	case errors.Is(err, errAlreadyDone):
		return outcomeProcessed, nil
	case errors.Is(err, errDefer):
		return outcomeDeferred, s.deferEvent(ctx, row, err.Error())
	case err != nil:
		return "", err
	}
	if state == models.EventIgnored {
		s.log.Info("Stripe event ignored", "event", row.ID, "type", row.Type, "why", note)
	} else {
		s.log.Info("Stripe event processed", "event", row.ID, "type", row.Type, "note", note)
	}
	return outcome, nil
}

var errAlreadyDone = errors.New("already processed")

// retryingKey marks a context already applying waiting events, so a credit inside it does not start again.
type retryingKey struct{}

// deferWindow is how long an event about an unknown payment is kept waiting before it is given up (and
// logged as an error for staff).
const deferWindow = 72 * time.Hour

func (s *Service) deferEvent(ctx context.Context, row *models.StripeEvent, why string) error {
	now := s.now().UTC()
	if now.Sub(row.ReceivedAt) > deferWindow {
		s.log.Error("Stripe event given up: its payment never became known", "event", row.ID, "type", row.Type)
		_, err := s.finish(ctx, row, models.EventIgnored, "given up after 72 h: "+why, nil)
		return err
	}
	return s.note(ctx, row, "waiting: "+why)
}

// retryLater notes why a pending event failed, and returns the cause: its job tries it again (NextRetry).
func (s *Service) retryLater(ctx context.Context, row *models.StripeEvent, cause error) error {
	// The delivery's own time may be what ran out: noting the retry gets a moment of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := s.note(ctx, row, "will retry: "+cause.Error()); err != nil {
		return errors.Join(cause, err)
	}
	return cause
}

// note says, for staff, why a pending event is still pending.
func (s *Service) note(ctx context.Context, row *models.StripeEvent, note string) error {
	return s.db.W.WithContext(ctx).Exec("UPDATE stripe_events SET note = ? WHERE id = ? AND state = ?",
		note, row.ID, models.EventPending).Error
}

// waitingTypes are the events that can wait for their payment (errDefer).
var waitingTypes = []string{EvChargeRefunded, EvDisputeCreated, EvDisputeClosed}

// processWaiting applies the pending events that name a payment just credited: a refund or a dispute
// that came before it. Only those, not every pending event: this runs inside a webhook's time budget,
// and other accounts' events keep their own jobs' schedule. (The waiting events' jobs, snoozed, then find
// them processed.)
func (s *Service) processWaiting(ctx context.Context, paymentIntent string) {
	// The events are found by the quoted id in their payload: a PaymentIntent id is letters, digits and
	// '_', and LIKE's wildcards in it are escaped.
	pattern := "%" + strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(`"`+paymentIntent+`"`) + "%"
	var ids []string
	if err := s.db.R.WithContext(ctx).Model(&models.StripeEvent{}).
		Where("state = ? AND type IN ? AND payload LIKE ? ESCAPE '!'", models.EventPending, waitingTypes, pattern).
		Order("stripe_created, id").Limit(100).Pluck("id", &ids).Error; err != nil {
		s.log.Warn("list Stripe events waiting for a payment", "payment_intent", paymentIntent, "err", err)
		return
	}
	s.processEach(ctx, ids)
}

func (s *Service) processEach(ctx context.Context, ids []string) {
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		if _, err := s.Process(ctx, id); err != nil {
			s.log.Warn("Stripe event still pending", "event", id, "err", err)
		}
	}
}

// effectOf reads what an event says and returns its effect; an effect that credits names the
// PaymentIntent it credited in *paid. Calls to Stripe it needs (a charge's refunds; the session or
// PaymentIntent itself when its amount is not the top-up's) happen here, before the transaction.
func (s *Service) effectOf(ctx context.Context, ev *stripe.Event, paid *string) (effect, error) {
	if ev.Livemode != s.live {
		// A test-mode payment must never credit a live wallet (nor the other way round): a test key on a
		// live installation, or a test endpoint pointed here, is a misconfiguration to see in the log.
		s.log.Error("Stripe event of the other mode ignored", "event", ev.ID, "event_livemode", ev.Livemode, "key_livemode", s.live)
		return nil, ignore("a livemode=%v event, and this installation's key is livemode=%v", ev.Livemode, s.live)
	}
	if ev.Data == nil {
		return nil, ignore("the event carries no object")
	}
	switch ev.Type {
	case EvSessionCompleted, EvSessionAsyncPaid, EvSessionAsyncFailed, EvSessionExpired:
		var sess stripe.CheckoutSession
		if err := json.Unmarshal(ev.Data.Raw, &sess); err != nil {
			return nil, ignore("unreadable checkout session: %v", err)
		}
		src, err := s.confirmSession(ctx, string(ev.Type), &sess)
		if err != nil {
			return nil, err
		}
		return s.sessionEffect(string(ev.Type), &sess, src, paid), nil
	case EvChargeRefunded:
		var ch stripe.Charge
		if err := json.Unmarshal(ev.Data.Raw, &ch); err != nil {
			return nil, ignore("unreadable charge: %v", err)
		}
		// A charge whose payment is not credited (yet) waits, before anything is asked of Stripe.
		if _, err := topupOfPayment(s.db.R.WithContext(ctx), ch.PaymentIntent); err != nil {
			return nil, err // errDefer: its payment is not credited yet; or not ours at all (ignored)
		}
		refunds, err := s.refundsOf(ctx, &ch)
		if err != nil {
			return nil, err
		}
		return s.refundEffect(&ch, refunds), nil
	case EvDisputeCreated, EvDisputeClosed:
		var d stripe.Dispute
		if err := json.Unmarshal(ev.Data.Raw, &d); err != nil {
			return nil, ignore("unreadable dispute: %v", err)
		}
		return s.disputeEffect(string(ev.Type), &d), nil
	case EvPaymentIntentPaid, EvPaymentIntentFailed:
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(ev.Data.Raw, &pi); err != nil {
			return nil, ignore("unreadable payment intent: %v", err)
		}
		src, err := s.confirmPaymentIntent(ctx, string(ev.Type), &pi)
		if err != nil {
			return nil, err
		}
		return s.paymentIntentEffect(string(ev.Type), &pi, src, paid), nil
	}
	return nil, ignore("videogen does not act on %s events", ev.Type)
}
