package payments

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// ErrNotRecorded is returned by Receive for a delivery that could not be recorded in time (the database
// is slow or down): nothing was kept, and Stripe must send it again.
var ErrNotRecorded = errors.New("the Stripe event could not be recorded")

// eventStore is what Receive needs: Record, then Process. The Service is the one; a test gives one that
// fails in ways the real one must not (a panic).
type eventStore interface {
	Record(ctx context.Context, payload []byte, signature string) (*Received, error)
	Process(ctx context.Context, eventID string) (string, error)
}

// Receive takes one webhook delivery: it records the event (which must succeed for Stripe to be told
// so), then processes it in what is left of the time budget (STRIPE_WEBHOOK_TIMEOUT); whatever is not
// done by then the event's job finishes. Stripe gives up after about 10 s and sends again later, so
// the answer never waits past the budget, even when the database driver does not give up on time
// (SQLite's busy wait): the work runs on its own goroutine, and a delivery not recorded by then is
// ErrNotRecorded — should it be recorded afterwards, Stripe's retry is recognised as a replay.
//
// The errors: ErrBadSignature and ErrInvalidEvent (Stripe did not send this; nothing recorded),
// ErrNotRecorded (send again), ErrPanicked (the work panicked — recovered here, outside any caller's
// recover, where it would end the process; an event already recorded stays pending for its job). A processing failure is no error: the event is recorded, and its outcome is "pending".
func (s *Service) Receive(ctx context.Context, payload []byte, signature string) (*Received, error) {
	return receive(ctx, s, s, payload, signature, s.cfg.WebhookBudget)
}

func receive(ctx context.Context, s *Service, events eventStore, payload []byte, signature string, budget time.Duration) (*Received, error) {
	if budget <= 0 {
		budget = 8 * time.Second
	}
	// The work must not end with the caller's context (the delivery's connection): what has begun is
	// finished, within the budget, whoever is still waiting.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	type recording struct {
		got *Received
		err error
	}
	type processing struct {
		outcome string
		err     error
	}
	recorded, processed := make(chan recording, 1), make(chan processing, 1)
	go func() {
		defer cancel()
		owed := func(err error) { recorded <- recording{err: err} }
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("Stripe webhook panicked", "panic", p, "stack", string(debug.Stack()))
				owed(fmt.Errorf("%w: %v", ErrPanicked, p))
			}
		}()
		got, err := events.Record(ctx, payload, signature)
		recorded <- recording{got, err}
		if err != nil {
			return
		}
		owed = func(err error) { processed <- processing{err: err} }
		outcome, err := events.Process(ctx, got.EventID)
		processed <- processing{outcome, err}
	}()
	// The work cancels ctx when it ends, so ctx.Done may be ready together with its result: the result wins.
	var r recording
	select {
	case r = <-recorded:
	case <-ctx.Done():
		select {
		case r = <-recorded:
		default:
			r.err = ctx.Err()
		}
	}
	switch {
	case errors.Is(r.err, ErrBadSignature), errors.Is(r.err, ErrInvalidEvent), errors.Is(r.err, ErrPanicked):
		return nil, r.err
	case r.err != nil:
		return nil, fmt.Errorf("%w: %w", ErrNotRecorded, r.err)
	}
	got := r.got
	var p processing
	select {
	case p = <-processed:
	case <-ctx.Done():
		select {
		case p = <-processed:
		default:
			p.outcome = "pending"
		}
	}
	switch {
	case errors.Is(p.err, ErrPanicked):
		// Recorded, and pending: its job tries it again with backoff. Stripe's own retry is a
		// replay, processed again too.
		s.log.Error("Stripe event not processed: it panicked", "event", got.EventID, "type", got.Type, "err", p.err)
		return got, p.err
	case p.err != nil:
		s.log.Warn("Stripe event left for its job", "event", got.EventID, "type", got.Type, "err", p.err)
		p.outcome = "pending"
	}
	got.Outcome = p.outcome
	return got, nil
}
