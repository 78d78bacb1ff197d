package worker

import (
	"context"
	"math"
	"time"

	"videogen/internal/tasks"
	"videogen/internal/upstream"
	"videogen/models"
)

// poll asks the upstream where a submitted task stands, with the credential that submitted it.
func (w *Worker) poll(ctx context.Context, t *models.Task, cred upstream.Credential) {
	st, err := w.Pool.Provider.Poll(ctx, cred, *t.UpstreamTaskID)
	if err != nil {
		// A lost poll is not a failure: try again later, further apart each time.
		w.Log.Warn("poll upstream", "task", t.ID, "err", err)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	w.apply(ctx, t, cred, st)
}

// apply acts on an upstream status.
func (w *Worker) apply(ctx context.Context, t *models.Task, cred upstream.Credential, st upstream.Status) {
	switch st.State {
	case upstream.StateCompleted:
		w.complete(ctx, t, cred)
	case upstream.StateFailed:
		msg := "The generation failed upstream"
		if st.ErrorMessage != "" {
			msg += ": " + clip(st.ErrorMessage, 300)
		}
		w.fail(ctx, t, "generation_failed", msg+". Your reservation was released.")
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

// reschedule releases the claim and sets the next poll, further apart with each poll.
func (w *Worker) reschedule(ctx context.Context, t *models.Task, progress int) {
	next := w.Tasks.Now().Add(backoff(w.cfg.PollMin, w.cfg.PollMax, t.PollCount, 1.5))
	if err := w.Tasks.Reschedule(ctx, t, w.cfg.ID, next, progress); err != nil {
		w.Log.Error("reschedule", "task", t.ID, "err", err)
	}
	if progress != t.Progress {
		w.changed(t)
	}
}

// backoff is min·factor^n, capped at max.
func backoff(minD, maxD time.Duration, n int, factor float64) time.Duration {
	d := float64(minD) * math.Pow(factor, float64(min(n, 40)))
	if d > float64(maxD) {
		return maxD
	}
	return time.Duration(d)
}
