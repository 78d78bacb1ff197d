package tasks

import (
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/billing"
	"videogen/internal/money"
	"videogen/models"
)

// FailWaiting ends, inside tx, every task of an account still waiting for an upstream slot: failed with
// code and message, its reservation released in full, its place in the backlog given back, a log line
// each — the same ending as Fail, but in the caller's transaction (disabling the account), so the
// account's state and its tasks change together or not at all. It returns the tasks it failed.
//
// Only tasks without a credential are touched: nothing was sent upstream for them, so nothing paid is
// thrown away. A task that already holds a credential was (or is being) submitted; it runs to its end
// and settles like any other. A worker may hold a lease on a waiting task while it assigns it a slot:
// the assignment's UPDATE (AssignWaiting) requires status 'queued' and no credential, so whichever commits first wins and
// the other changes nothing. Each ending writes its webhook event as Fail's does. Lock order is the store's: the tasks first, then (through billing) the
// account.
func (s *Store) FailWaiting(tx *gorm.DB, accountID int64, code, message string) ([]models.Task, error) {
	now := s.Now()
	q := tx.Where("account_id = ? AND status = ? AND credential_id IS NULL", accountID, Queued).Order("id")
	if s.db.Postgres {
		q = q.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	var waiting []models.Task
	if err := q.Find(&waiting).Error; err != nil {
		return nil, fmt.Errorf("find the waiting tasks of account %d: %w", accountID, err)
	}
	failed := waiting[:0]
	for _, t := range waiting {
		ok, err := s.failWaiting(tx, t, code, message, now)
		if err != nil {
			return nil, err
		}
		if ok {
			t.Status, t.BillingState, t.LeaseOwner, t.LeaseUntil = Failed, billing.Released, nil, nil
			failed = append(failed, t)
		}
	}
	return failed, nil
}

func (s *Store) failWaiting(tx *gorm.DB, t models.Task, code, message string, now time.Time) (bool, error) {
	res := tx.Exec(`UPDATE tasks SET status = ?, billing_state = ?, error_code = ?, error_message = ?, lease_owner = NULL, lease_until = NULL,
		updated_at = ? WHERE id = ? AND status = ? AND credential_id IS NULL AND billing_state = ?`,
		Failed, billing.Released, code, message, now, t.ID, Queued, billing.Reserved)
	if res.Error != nil {
		return false, fmt.Errorf("fail %s: %w", t.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return false, nil // it got a slot or ended meanwhile
	}
	if err := billing.Release(tx, t.AccountID, t.ID, money.Micros(t.AmountMicros), code, now); err != nil {
		return false, err
	}
	if err := leaveBacklog(tx, t.AccountID); err != nil {
		return false, err
	}
	if err := s.taskEnded(tx, &t, false, now); err != nil {
		return false, err
	}
	if err := logEvent(tx, t.ID, now, Queued, Failed, code+": "+message); err != nil {
		return false, err
	}
	return true, nil
}
