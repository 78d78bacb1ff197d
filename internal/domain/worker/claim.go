package worker

import (
	"context"

	"videogen/models"
)

// Claim leases due tasks: those in flight whose next check is due, and as many waiting tasks (oldest
// first) as the healthy credentials have free slots — only tasks of the aliases those credentials serve,
// so a task no free credential can take does not hold a handler.
func (w *Worker) Claim(ctx context.Context, limit int) ([]models.Task, error) {
	out, err := w.Tasks.ClaimDue(ctx, w.cfg.ID, w.cfg.Lease, limit)
	if err != nil {
		return nil, err
	}
	limit -= len(out)
	if limit <= 0 {
		return out, nil
	}
	var healthy []string
	for _, id := range w.Pool.IDs() {
		if w.Pool.Health.Healthy(id) {
			healthy = append(healthy, id)
		}
	}
	slots, err := w.Tasks.FreeSlots(ctx, healthy)
	if err != nil || len(slots) == 0 {
		return out, err
	}
	var free int64
	ids := make([]string, 0, len(slots))
	for id, n := range slots {
		free += n
		ids = append(ids, id)
	}
	waiting, err := w.Tasks.ClaimWaiting(ctx, w.cfg.ID, w.cfg.Lease, min(free, int64(limit)), w.Pool.Aliases(ids))
	if err != nil {
		return out, err
	}
	return append(out, waiting...), nil
}
