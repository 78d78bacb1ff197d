package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/money"
	"videogen/models"
)

// cancelTimeout bounds one cancel call: the task has already ended here.
const cancelTimeout = 30 * time.Second

// cancelUpstream asks the provider to stop a task we gave up on while it still had it (its run timeout
// passed), so that nobody pays for work nobody collects. One instance asks (ClaimCancel); the task log
// says how it went, and where the provider may still bill the task, its expected cost is kept as the
// task's upstream cost, which the margin report shows as its own line (docs/upstreams.md#cancel).
func (w *Worker) cancelUpstream(ctx context.Context, t *models.Task) {
	if t.CredentialID == nil || t.UpstreamTaskID == nil {
		return // never accepted upstream: nothing runs there
	}
	log := w.Log.With("task", t.ID, "credential", *t.CredentialID)
	claimed, err := w.Tasks.ClaimCancel(ctx, t)
	if err != nil {
		log.Error("claim the upstream cancel", "err", err)
		return
	}
	if !claimed {
		return
	}
	cred, ok := w.Pool.Credential(*t.CredentialID)
	outcome, detail := tasks.CancelFailed, "the credential that submitted the task is no longer configured, so the provider was not asked to stop it; it may bill it"
	if ok {
		cctx, cancel := context.WithTimeout(ctx, cancelTimeout)
		err = w.Pool.Cancel(cctx, cred, *t.UpstreamTaskID)
		cancel()
		outcome, detail = cancelOutcome(err)
	}
	var leaked *money.Micros
	if outcome != tasks.CancelDone {
		leaked = expectedCost(t, cred)
		log.Warn("upstream task left running", "outcome", outcome, "err", err)
	}
	if err := w.Tasks.RecordCancel(ctx, t, outcome, detail, leaked); err != nil {
		log.Error("record the upstream cancel", "err", err)
	}
}

// cancelOutcome reads what asking the provider to stop a task came to.
func cancelOutcome(err error) (outcome, detail string) {
	switch {
	case err == nil:
		return tasks.CancelDone, "asked the provider to stop the task: cancelled, nothing to pay upstream"
	case errors.Is(err, upstream.ErrUnknownTask):
		return tasks.CancelDone, "asked the provider to stop the task: it no longer has it"
	case errors.Is(err, upstream.ErrNotCancellable):
		return tasks.CancelRefused, fmt.Sprintf("asked the provider to stop the task: it cannot (%s); it may bill it", clip(err.Error(), 200))
	default:
		return tasks.CancelFailed, fmt.Sprintf("asking the provider to stop the task failed (%s); it may bill it", clip(err.Error(), 200))
	}
}

// expectedCost is what the provider will likely bill for a task left running: its seconds at the
// route's price per second (a token price cannot be told before the provider reports usage). nil: no
// price to tell.
func expectedCost(t *models.Task, cred upstream.Credential) *money.Micros {
	route, ok := cred.Models[t.Model]
	if !ok || route.Unpriced || route.CostPerSecond == 0 {
		return nil
	}
	m := route.CostPerSecond * money.Micros(t.Seconds)
	return &m
}
