package tasks

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"videogen/internal/money"
	"videogen/models"
)

// What came of asking the provider to stop a task we gave up on (tasks.upstream_cancel,
// docs/upstreams.md#cancel).
const (
	CancelAsking  = "asking"          // an instance is asking now
	CancelDone    = "cancelled"       // the provider stopped it (or no longer has it): nothing to pay
	CancelRefused = "not_cancellable" // the provider cannot stop it in its state, or has no cancel
	CancelFailed  = "failed"          // the provider could not be asked (no answer, an error)
)

// ClaimCancel lets one instance ask the provider to stop a task that ended here while the provider
// still had it: the task has failed, it was accepted upstream, and nobody asked yet. Only the instance
// that gets true asks.
func (s *Store) ClaimCancel(ctx context.Context, t *models.Task) (bool, error) {
	res := s.db.W.WithContext(ctx).Exec(`UPDATE tasks SET upstream_cancel = ? WHERE id = ? AND status = ? AND upstream_task_id IS NOT NULL
		AND upstream_cancel IS NULL`, CancelAsking, t.ID, Failed)
	if res.Error != nil {
		return false, fmt.Errorf("claim the upstream cancel of %s: %w", t.ID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RecordCancel records how asking went, with a line in the task log. leaked is what the provider is
// expected to bill for the task nobody collects (nil: nothing, or no price to tell); it is kept as the
// task's upstream cost, so the margin report shows the leak (margin.Report's FailedLocally).
func (s *Store) RecordCancel(ctx context.Context, t *models.Task, outcome, detail string, leaked *money.Micros) error {
	var cost any
	if leaked != nil {
		cost = int64(*leaked)
	}
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE tasks SET upstream_cancel = ?, upstream_cost_micros = COALESCE(upstream_cost_micros, ?) WHERE id = ? AND upstream_cancel = ?`,
			outcome, cost, t.ID, CancelAsking)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil // not claimed here
		}
		return logEvent(tx, t.ID, s.Now(), Failed, Failed, detail)
	})
	if err != nil {
		return fmt.Errorf("record the upstream cancel of %s: %w", t.ID, err)
	}
	return nil
}
