package worker

import (
	"context"

	"videogen/internal/domain/tasks"
	"videogen/models"
)

// Claimed is a task a claim round leased to this worker, and what to do with it first.
type Claimed struct {
	models.Task
	// Assigned: the task was waiting and has just been given a credential and its first submission
	// attempt (tasks.Store.AssignWaiting): it is submitted at once.
	Assigned bool
	// Unreadable: the task was waiting, but its stored inputs cannot be read: it fails.
	Unreadable bool
}

// Claim leases due tasks: those in flight whose next check is due, then as many waiting tasks (oldest
// first) as the healthy credentials have free slots, each given its credential in the same transaction
// — only tasks of the aliases those credentials serve, so a task no free credential can take does not
// hold a handler.
func (w *Worker) Claim(ctx context.Context, limit int) ([]Claimed, error) {
	due, err := w.Tasks.ClaimDue(ctx, w.cfg.ID, w.cfg.Lease, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Claimed, 0, len(due))
	for _, t := range due {
		out = append(out, Claimed{Task: t})
	}
	limit -= len(due)
	if limit <= 0 {
		return out, nil
	}
	var healthy []string
	for _, id := range w.Pool.IDs() {
		if w.Pool.Health.Healthy(id) {
			healthy = append(healthy, id)
		}
	}
	got, err := w.Tasks.AssignWaiting(ctx, w.cfg.ID, w.cfg.Lease, limit, w.routing(healthy), w.cfg.RunTimeout, w.Tasks.Now().Add(w.cfg.PollMin))
	if err != nil {
		return out, err
	}
	for _, t := range got.Tasks {
		out = append(out, Claimed{Task: t, Assigned: true})
	}
	for _, t := range got.Unreadable {
		out = append(out, Claimed{Task: t, Unreadable: true})
	}
	return out, nil
}

// routing is how the pool routes waiting tasks among the healthy credentials.
func (w *Worker) routing(healthy []string) tasks.Routing {
	return tasks.Routing{
		Credentials: healthy,
		Aliases:     w.Pool.Aliases,
		Candidates: func(t *models.Task) ([]string, error) {
			req, err := t.Request()
			if err != nil {
				return nil, err
			}
			return w.Pool.Candidates(req), nil
		},
		UpstreamModel: func(credID, alias string) string {
			c, _ := w.Pool.Credential(credID)
			return c.Models[alias].UpstreamModel
		},
	}
}
