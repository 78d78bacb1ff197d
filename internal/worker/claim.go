package worker

import (
	"context"

	"videogen/models"
)

// Claim leases due tasks: those in flight whose next check is due, and as many waiting tasks (oldest
// first) as the pool has free slots.
func (w *Worker) Claim(ctx context.Context, limit int) ([]models.Task, error) {
	out, err := w.Tasks.ClaimDue(ctx, w.cfg.ID, w.cfg.Lease, limit)
	if err != nil {
		return nil, err
	}
	limit -= len(out)
	if limit <= 0 {
		return out, nil
	}
	free, err := w.Tasks.FreeSlots(ctx, w.Pool.IDs())
	if err != nil || free <= 0 {
		return out, err
	}
	waiting, err := w.Tasks.ClaimWaiting(ctx, w.cfg.ID, w.cfg.Lease, min(free, int64(limit)))
	if err != nil {
		return out, err
	}
	return append(out, waiting...), nil
}
