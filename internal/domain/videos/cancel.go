package videos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/ids"
	"videogen/internal/money"
	"videogen/internal/refusal"
)

// ErrFinished: the task had already ended, so there was nothing to cancel.
var ErrFinished = errors.New("the video has already finished")

// Cancelled is a task its customer cancelled: failed with code cancelled, its reservation released.
type Cancelled struct {
	Released money.Micros
}

// What a customer is told when a cancel does not happen (409 video_not_finished: the video goes on).
const (
	msgCancelSubmitting = "This video is being sent for generation right now, so it cannot be cancelled at this moment: the provider may already be generating it. Try again in a few seconds; nothing was changed."
	msgCancelBusy       = "This video is being checked with its provider right now, so it was not cancelled. Try again in a few seconds; nothing was changed."
	msgCannotStop       = "This video has already started generating and its provider cannot stop it now, so it was not cancelled: it stays reserved and is charged only if it completes. Poll GET /v1/videos/{id} until it is completed or failed; you can delete it then."
	msgCannotAsk        = "The provider generating this video could not be reached to stop it, so it was not cancelled and nothing was changed. Try again in a few seconds."
)

// Bounds of a cancel: how long it waits for a worker that holds the task (a poll lasts well under a
// second), and how long it may ask the provider (the task's lease covers both, with room).
const (
	cancelWait    = 3 * time.Second
	cancelAsk     = 20 * time.Second
	cancelLease   = cancelAsk + 10*time.Second
	cancelRetryIn = 100 * time.Millisecond
)

// Cancel stops one of the account's unfinished tasks at its customer's request (by names who, in the
// task's error message and log), and releases its reservation in full — through tasks.Store's failing
// transaction, so everything a failure does happens. A task not yet sent to a provider ends at once; a
// task accepted upstream is asked of its provider first, with the credential that created it, and ends
// only if the provider stopped it. A refusal (refusal.Error, code video_not_finished) means nothing
// changed. ErrFinished: the task had already ended.
func (s *Service) Cancel(ctx context.Context, accountID int64, id, by string) (*Cancelled, error) {
	if !ids.IsVideoID(id) {
		return nil, refusal.NotFound
	}
	deadline := time.Now().Add(cancelWait)
	for {
		c, err := s.Tasks.StartCancel(ctx, accountID, id, msgCancelled(by, false), cancelLease)
		switch {
		case errors.Is(err, tasks.ErrNoTask):
			return nil, refusal.NotFound
		case errors.Is(err, tasks.ErrSubmitting):
			return nil, refusal.CannotCancel(msgCancelSubmitting)
		case errors.Is(err, tasks.ErrHeld):
			// A worker is polling it (or another cancel is asking): wait for it, briefly.
			if time.Now().After(deadline) {
				return nil, refusal.CannotCancel(msgCancelBusy)
			}
			if err := sleep(ctx, cancelRetryIn); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		case c.Finished:
			return nil, ErrFinished
		case c.Cancelled:
			s.Polls.Forget(accountID, id)
			return &Cancelled{Released: money.Micros(c.Task.AmountMicros)}, nil
		}
		out, err := s.cancelUpstream(ctx, c, by)
		if errors.Is(err, errEndedMeanwhile) {
			continue // look again: it is finished now
		}
		return out, err
	}
}

// Why a cancel was refused, for a console to word it its own way (CancelRefusal).
const (
	CancelRefusedStarted     = "started"     // the provider is generating it and cannot stop it
	CancelRefusedBusy        = "busy"        // it was being sent or checked at that moment
	CancelRefusedUnreachable = "unreachable" // the provider could not be asked
)

// CancelRefusal names why err, a refusal of Cancel, was given ("" for any other error).
func CancelRefusal(err error) string {
	r, ok := refusal.As(err)
	if !ok {
		return ""
	}
	switch r.Message {
	case msgCannotStop:
		return CancelRefusedStarted
	case msgCancelSubmitting, msgCancelBusy:
		return CancelRefusedBusy
	case msgCannotAsk:
		return CancelRefusedUnreachable
	}
	return ""
}

var errEndedMeanwhile = errors.New("the task ended while its provider was asked to stop it")

// cancelUpstream asks the provider to stop a task it accepted, holding the task's lease (c.Owner).
// The provider's answer decides: stopped (or no longer there) ends the task here as cancelled;
// otherwise the lease is given back and the task goes on.
func (s *Service) cancelUpstream(ctx context.Context, c *tasks.Cancellation, by string) (*Cancelled, error) {
	t := &c.Task
	// Whatever happens to the request now, the task's state is settled and its lease given back.
	ctx = context.WithoutCancel(ctx)
	cred, ok := upstream.Credential{}, false
	if s.Pool != nil {
		cred, ok = s.Pool.Credential(*t.CredentialID)
	}
	if !ok {
		return nil, s.abandonCancel(ctx, c, by, "the credential that submitted it is no longer configured, so its provider cannot be asked", msgCannotStop)
	}
	actx, cancel := context.WithTimeout(ctx, cancelAsk)
	err := s.Pool.Cancel(actx, cred, *t.UpstreamTaskID)
	cancel()
	switch {
	case err == nil || errors.Is(err, upstream.ErrUnknownTask):
		detail := fmt.Sprintf("cancel asked by %s: the provider stopped the task, nothing to pay upstream", by)
		if err != nil {
			detail = fmt.Sprintf("cancel asked by %s: the provider no longer has the task", by)
		}
		won, err := s.Tasks.FinishCancel(ctx, t, msgCancelled(by, true), detail)
		if err != nil {
			// The provider has stopped it: the worker's next poll sees that and ends it, released.
			return nil, err
		}
		if !won {
			return nil, errEndedMeanwhile
		}
		s.Polls.Forget(t.AccountID, t.ID)
		return &Cancelled{Released: money.Micros(t.AmountMicros)}, nil
	case errors.Is(err, upstream.ErrNotCancellable):
		return nil, s.abandonCancel(ctx, c, by, "the provider cannot stop it now ("+clip(err.Error(), 200)+")", msgCannotStop)
	default:
		s.Log.Warn("ask the provider to stop a task", "task", t.ID, "credential", cred.ID, "err", err)
		return nil, s.abandonCancel(ctx, c, by, "asking the provider failed ("+clip(err.Error(), 200)+")", msgCannotAsk)
	}
}

// abandonCancel gives the task back to the worker and logs why; the refusal is what the customer is
// told.
func (s *Service) abandonCancel(ctx context.Context, c *tasks.Cancellation, by, why, message string) error {
	if err := s.Tasks.AbandonCancel(ctx, &c.Task, c.Owner, "cancel asked by "+by+": not done, "+why); err != nil {
		return err
	}
	return refusal.CannotCancel(message)
}

// msgCancelled is a cancelled task's error message.
func msgCancelled(by string, upstream bool) string {
	if upstream {
		return "Cancelled at your request (" + by + "); the provider stopped it before generating it. Your reservation was released in full."
	}
	return "Cancelled at your request (" + by + ") before it was sent for generation. Your reservation was released in full."
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
