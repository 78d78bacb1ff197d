package worker

import (
	"context"
	"fmt"
	"io"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/ids"
	"videogen/internal/money"
	"videogen/models"
)

// A copy of an output from the upstream is abandoned after downloadIdle without a byte, or after
// downloadTimeout in all, so a stalled transfer cannot hold a handler; the next poll starts a fresh copy.
const (
	downloadIdle    = time.Minute
	downloadTimeout = 30 * time.Minute
)

// complete copies the output into the platform's storage, with its stills (copyStills), and only then has the task store mark the task
// completed, charge it and free its slot, in one transaction. A copy that fails is retried on the next
// poll.
func (w *Worker) complete(ctx context.Context, t *models.Task, cred upstream.Credential, st upstream.Status) {
	log := w.Log.With("task", t.ID)
	dctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	idle := time.AfterFunc(downloadIdle, cancel)
	defer idle.Stop()
	body, size, err := w.Pool.Download(dctx, cred, *t.UpstreamTaskID)
	if err != nil {
		log.Warn("download output", "err", err)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	body = idleReader{body, idle}
	// A key of its own per copy: if two instances ever copy the same task, neither deletes the other's.
	key := fmt.Sprintf("outputs/%s/%s.mp4", t.ID, ids.NewToken(12))
	n, err := w.Blobs.Put(dctx, key, body)
	_ = body.Close()
	if err == nil && (n == 0 || (size >= 0 && n != size)) {
		err = fmt.Errorf("copied %d of %d bytes", n, size)
	}
	if err != nil {
		log.Warn("copy output", "err", err)
		_ = w.Blobs.Delete(ctx, key)
		if blob.IsUnavailable(err) {
			// The video is done and waits at the provider; the storage is down. Its deadline moves on
			// with each attempt, so the outage delays the task rather than failing it.
			now := w.Tasks.Now()
			wait := backoff(w.cfg.PollMin, w.cfg.PollMax, t.PollCount, 1.5)
			if err := w.Tasks.HoldForStorage(ctx, t, w.cfg.ID, now.Add(wait), now.Add(w.cfg.RunTimeout)); err != nil {
				log.Error("hold for the storage", "err", err)
			}
			return
		}
		w.reschedule(ctx, t, t.Progress)
		return
	}
	// The video is in; the stills that follow are bounded by downloadTimeout, not by the video's idle rule
	// (ffmpeg reads a long video for a while before writing a spritesheet byte).
	idle.Stop()
	out := tasks.Output{Key: key, Size: n, Rendered: tasks.Rendered(st.Rendered), ExpectedSize: cred.Models[t.Model].Caps.Expected(t.Size)}
	w.copyStills(dctx, t, cred, &out)
	w.copyLastFrame(dctx, t, cred, &out)
	won, err := w.Tasks.Complete(ctx, t, out, w.Tasks.Now().Add(w.cfg.OutputRetention), taskCost(t, cred, st.Usage))
	if err != nil {
		log.Error("complete task", "err", err)
		w.deleteCopy(ctx, out)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	if !won {
		w.lateCompletion(ctx, t.ID)
		w.deleteCopy(ctx, out)
		return
	}
	w.changed(t)
}

// deleteCopy deletes a copy that no row names (the completion did not commit); what it misses, the orphan
// sweep deletes.
func (w *Worker) deleteCopy(ctx context.Context, out tasks.Output) {
	for _, key := range out.Keys() {
		_ = w.Blobs.Delete(ctx, key)
	}
}

// taskCost is what the task cost upstream at the operator's price for its credential and alias: per
// million tokens when that price is set and the provider reported tokens, else per second of video.
// Tokens are rounded to the nearest micro-dollar, half up. Without a price (the alias is not, or no
// longer, priced on the credential) the cost is left unrecorded.
func taskCost(t *models.Task, cred upstream.Credential, u upstream.Usage) tasks.Cost {
	var c tasks.Cost
	if u.CompletionTokens > 0 || u.TotalTokens > 0 {
		c.CompletionTokens, c.TotalTokens = &u.CompletionTokens, &u.TotalTokens
	}
	route, ok := cred.Models[t.Model]
	switch {
	case !ok || route.Unpriced:
	case route.CostPerMillionTokens > 0 && u.CompletionTokens > 0:
		m := money.Micros((u.CompletionTokens*int64(route.CostPerMillionTokens) + 500_000) / 1_000_000)
		c.Micros = &m
	default:
		m := route.CostPerSecond * money.Micros(t.Seconds)
		c.Micros = &m
	}
	return c
}

// lateCompletion notes an upstream completion for a task that had already ended here (its deadline
// passed): the result is ignored, the customer keeps the refund, and the task log says so.
func (w *Worker) lateCompletion(ctx context.Context, taskID string) {
	w.Log.Warn("upstream completed a task that had already ended; ignored", "task", taskID)
	if err := w.Tasks.NoteLateCompletion(ctx, taskID); err != nil {
		w.Log.Error("log late completion", "task", taskID, "err", err)
	}
}

// idleReader pushes the idle deadline of a download back with every byte that arrives.
type idleReader struct {
	io.ReadCloser
	idle *time.Timer
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.idle.Reset(downloadIdle)
	}
	return n, err
}
