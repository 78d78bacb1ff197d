package worker

import (
	"context"
	"encoding/json"
	"fmt"

	"videogen/internal/upstream"
	"videogen/internal/videos"
	"videogen/models"
)

// sweep ends tasks past their deadlines. Several instances may sweep at once: every ending is guarded, so
// each task still ends once. (Outputs past their retention are the janitor's, on every instance.)
func (w *Worker) sweep(ctx context.Context) {
	now := w.clock()
	var waiting []models.Task
	if err := w.db.R.WithContext(ctx).Where("status = ? AND credential_id IS NULL AND queue_deadline < ?", models.StatusQueued, now).
		Limit(100).Find(&waiting).Error; err != nil {
		w.log.Error("find tasks past queue deadline", "err", err)
	}
	for i := range waiting {
		w.fail(ctx, &waiting[i], "queue_timeout", "No generation capacity became free in time. Your reservation was released; create the task again.")
	}
	var running []models.Task
	if err := w.db.R.WithContext(ctx).Where("status IN ? AND credential_id IS NOT NULL AND run_deadline < ?", []string{models.StatusQueued, models.StatusInProgress}, now).
		Limit(100).Find(&running).Error; err != nil {
		w.log.Error("find tasks past run deadline", "err", err)
	}
	for i := range running {
		w.fail(ctx, &running[i], "run_timeout", fmt.Sprintf("The generation did not finish within %s. Your reservation was released.", w.cfg.RunTimeout))
	}
	// Idempotency keys bind for 24 hours (videos.IdempotencyWindow); older rows only take space.
	if err := w.db.W.WithContext(ctx).Exec("DELETE FROM idempotency_keys WHERE created_at < ?", now.Add(-videos.IdempotencyWindow)).Error; err != nil {
		w.log.Error("delete old idempotency keys", "err", err)
	}
}

// Recheck asks the upstream about a task that has already ended here — for support, when a customer or
// the provider's invoice says a video did finish. A completion found this way is logged in the task log
// and ignored: the task keeps its ending and its refund. It returns the upstream state.
func (w *Worker) Recheck(ctx context.Context, taskID string) (string, error) {
	var t models.Task
	if err := w.db.R.WithContext(ctx).Where("id = ?", taskID).Take(&t).Error; err != nil {
		return "", fmt.Errorf("read task %s: %w", taskID, err)
	}
	if t.CredentialID == nil || t.UpstreamTaskID == nil {
		return "", fmt.Errorf("task %s was never accepted upstream", taskID)
	}
	cred, ok := w.pool.Credential(*t.CredentialID)
	if !ok {
		return "", fmt.Errorf("credential %s is not configured", *t.CredentialID)
	}
	st, err := w.pool.Provider.Poll(ctx, cred, *t.UpstreamTaskID)
	if err != nil {
		return "", fmt.Errorf("poll %s: %w", taskID, err)
	}
	if !t.Terminal() {
		return st.State, nil // the worker handles live tasks on its own schedule
	}
	if st.State == upstream.StateCompleted && t.Status != models.StatusCompleted {
		w.lateCompletion(ctx, &t)
	}
	return st.State, nil
}

func submitRequest(t *models.Task) (upstream.SubmitRequest, error) {
	var in models.TaskInputs
	if err := json.Unmarshal([]byte(t.Inputs), &in); err != nil {
		return upstream.SubmitRequest{}, fmt.Errorf("decode inputs of %s: %w", t.ID, err)
	}
	return upstream.SubmitRequest{
		Model: t.Model, Prompt: t.Prompt, Seconds: t.Seconds, Size: t.Size, AspectRatio: t.AspectRatio,
		GenerateAudio: t.GenerateAudio, Watermark: t.Watermark, Inputs: in, IdempotencyKey: *t.UpstreamKey,
	}, nil
}
