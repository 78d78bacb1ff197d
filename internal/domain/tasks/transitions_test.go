package tasks_test

import (
	"testing"

	"videogen/internal/domain/tasks"
)

// Who may write tasks and their log is held by internal/architecture's TestOwnership.

// TestTransitions: the table allows exactly the moves of docs/api.md and docs/design.md §5 — forward,
// and from queued straight to an end — and nothing out of an ending.
func TestTransitions(t *testing.T) {
	all := []string{tasks.Queued, tasks.InProgress, tasks.Completed, tasks.Failed}
	allowed := map[[2]string]bool{
		{tasks.Queued, tasks.InProgress}: true, {tasks.Queued, tasks.Completed}: true, {tasks.Queued, tasks.Failed}: true,
		{tasks.InProgress, tasks.Completed}: true, {tasks.InProgress, tasks.Failed}: true,
	}
	for _, from := range all {
		for _, to := range all {
			if got := tasks.CanMove(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s allowed: %v", from, to, got)
			}
		}
		if tasks.Terminal(from) != (from == tasks.Completed || from == tasks.Failed) {
			t.Errorf("%s terminal: %v", from, tasks.Terminal(from))
		}
	}
}
