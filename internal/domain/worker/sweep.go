package worker

import (
	"context"
	"fmt"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
)

// sweepLoop runs the deadline sweep on its own timer, so it is never delayed by tasks.
func (w *Worker) sweepLoop(ctx, work context.Context) {
	// Deadlines are minutes long: a tenth of a second late ending one costs nothing, reading them more
	// often than that costs every idle instance its database time.
	every := min(max(w.cfg.PollMin*2, 100*time.Millisecond), 2*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sweep(work)
		}
	}
}

// sweep ends tasks past their deadlines. Several instances may sweep at once: every ending is guarded, so
// each task still ends once. (Outputs past their retention are the janitor's, on every instance.)
func (w *Worker) sweep(ctx context.Context) {
	waiting, running, err := w.Tasks.PastDeadline(ctx, 100)
	if err != nil {
		w.Log.Error("find tasks past their deadlines", "err", err)
	}
	for i := range waiting {
		w.fail(ctx, &waiting[i], "queue_timeout", "No generation capacity became free in time. Your reservation was released; create the task again.")
	}
	for i := range running {
		w.fail(ctx, &running[i], "run_timeout", fmt.Sprintf("The generation did not finish within %s. Your reservation was released.", w.cfg.RunTimeout))
		w.cancelUpstream(ctx, &running[i])
	}
}

// Recheck asks the upstream about a task that has already ended here — for support, when a customer or
// the provider's invoice says a video did finish. A completion found this way is logged in the task log
// and ignored: the task keeps its ending and its refund. It returns the upstream state.
func (w *Worker) Recheck(ctx context.Context, taskID string) (string, error) {
	t, err := w.Tasks.Get(ctx, taskID)
	if err != nil {
		return "", err
	}
	if t.CredentialID == nil || t.UpstreamTaskID == nil {
		return "", fmt.Errorf("task %s was never accepted upstream", taskID)
	}
	cred, ok := w.Pool.Credential(*t.CredentialID)
	if !ok {
		return "", fmt.Errorf("credential %s is not configured", *t.CredentialID)
	}
	st, err := w.Pool.Poll(ctx, cred, *t.UpstreamTaskID)
	if err != nil {
		return "", fmt.Errorf("poll %s: %w", taskID, err)
	}
	if !tasks.Terminal(t.Status) {
		return st.State, nil // the worker handles live tasks on its own schedule
	}
	if st.State == upstream.StateCompleted && t.Status != tasks.Completed {
		w.lateCompletion(ctx, t.ID)
	}
	return st.State, nil
}
