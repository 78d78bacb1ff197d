package worker

import (
	"context"
	"fmt"
	"math"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/models"
)

// poll asks the upstream where a submitted task stands, with the credential that submitted it.
func (w *Worker) poll(ctx context.Context, t *models.Task, cred upstream.Credential) {
	st, err := w.Pool.Poll(ctx, cred, *t.UpstreamTaskID)
	if err != nil {
		// A lost poll is not a failure: try again later, further apart each time.
		next := w.rescheduleAfter(ctx, t, t.Progress, upstream.RetryAfter(err))
		w.Log.Warn("poll upstream", "task", t.ID, "credential", cred.ID, "poll", t.PollCount, "next_in", next, "err", err)
		w.note(ctx, t, fmt.Sprintf("poll %d failed (%s); next poll in %s", t.PollCount+1, clip(err.Error(), 200), next.Round(time.Millisecond)))
		return
	}
	w.apply(ctx, t, cred, st)
}

// apply acts on an upstream status.
func (w *Worker) apply(ctx context.Context, t *models.Task, cred upstream.Credential, st upstream.Status) {
	switch st.State {
	case upstream.StateCompleted:
		w.complete(ctx, t, cred, st)
	case upstream.StateFailed:
		w.note(ctx, t, fmt.Sprintf("failed upstream: %s %s", st.ErrorCode, clip(st.ErrorMessage, 500)))
		if st.RetryOnce && t.UpstreamRetries == 0 {
			again, err := w.Tasks.SubmitAgain(ctx, t, w.cfg.ID, w.Tasks.Now().Add(w.cfg.PollMin), "the provider calls this failure passing ("+st.ErrorCode+")")
			if err != nil {
				w.Log.Error("submit again", "task", t.ID, "err", err)
				return
			}
			if again {
				return
			}
		}
		if st.PolicyFailure {
			w.fail(ctx, t, "content_policy_violation", msgFailedPolicy)
			return
		}
		w.fail(ctx, t, "generation_failed", msgFailed)
	case upstream.StateInProgress:
		progress := min(max(st.Progress, 0), 99)
		if t.Status == tasks.Queued {
			if err := w.Tasks.MarkInProgress(ctx, t, progress); err != nil {
				w.Log.Error("mark in progress", "task", t.ID, "err", err)
			}
			t.Status = tasks.InProgress
			w.changed(t)
		}
		w.reschedule(ctx, t, progress)
	default:
		w.reschedule(ctx, t, t.Progress)
	}
}

// reschedule releases the claim and sets the next poll, further apart with each poll; it returns the
// interval.
func (w *Worker) reschedule(ctx context.Context, t *models.Task, progress int) time.Duration {
	return w.rescheduleAfter(ctx, t, progress, 0)
}

// rescheduleAfter is reschedule waiting at least atLeast (a provider's Retry-After).
func (w *Worker) rescheduleAfter(ctx context.Context, t *models.Task, progress int, atLeast time.Duration) time.Duration {
	wait := max(backoff(w.cfg.PollMin, w.cfg.PollMax, t.PollCount, 1.5), atLeast)
	if err := w.Tasks.Reschedule(ctx, t, w.cfg.ID, w.Tasks.Now().Add(wait), progress); err != nil {
		w.Log.Error("reschedule", "task", t.ID, "err", err)
	}
	if progress != t.Progress {
		w.changed(t)
	}
	return wait
}

// backoff is min·factor^n, capped at max.
func backoff(minD, maxD time.Duration, n int, factor float64) time.Duration {
	d := float64(minD) * math.Pow(factor, float64(min(n, 40)))
	if d > float64(maxD) {
		return maxD
	}
	return time.Duration(d)
}
