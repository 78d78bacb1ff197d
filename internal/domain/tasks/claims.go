package tasks

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/models"
)

// A claim (lease) is how one worker holds a task while it handles it: lease_owner and lease_until. On
// PostgreSQL, FOR UPDATE SKIP LOCKED lets instances claim side by side without ever taking the same
// task; on SQLite the single writer serialises claims. A crashed instance's claims come free when their
// lease ends.

func (s *Store) skipLocked() string {
	if s.db.Postgres {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// ClaimDue leases up to limit tasks that hold a credential and whose next check is due, soonest first.
func (s *Store) ClaimDue(ctx context.Context, owner string, lease time.Duration, limit int) ([]models.Task, error) {
	out, err := s.claim(ctx, owner, lease, int64(limit), "credential_id IS NOT NULL AND status IN ('queued', 'in_progress')", "next_check_at")
	if err != nil {
		return nil, fmt.Errorf("claim in-flight tasks: %w", err)
	}
	return out, nil
}

// claim leases up to limit due, unleased tasks matching which (a fixed condition of this file), in order.
func (s *Store) claim(ctx context.Context, owner string, lease time.Duration, limit int64, which, order string) ([]models.Task, error) {
	now := s.Now()
	var out []models.Task
	due := "SELECT id FROM tasks WHERE " + which + " AND next_check_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY " + order +
		" LIMIT ?" + s.skipLocked()
	args := []any{owner, now.Add(lease), now, now, limit}
	err := s.db.W.WithContext(ctx).Raw("UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE id IN ("+due+") RETURNING *", args...).Scan(&out).Error
	return out, err
}

// NextDue is the earliest time a task with a credential may be claimed, as far as the database knows
// now: the next check of an unleased one, or the end of a lease (its holder may have died). ok is false
// when no such task exists. An idle worker sleeps until then instead of asking for claims on every tick.
func (s *Store) NextDue(ctx context.Context) (next time.Time, ok bool, err error) {
	inFlight := s.db.R.WithContext(ctx).Model(&models.Task{}).
		Where("credential_id IS NOT NULL AND status IN ?", Unfinished).Limit(1).Session(&gorm.Session{})
	var checks, leases []time.Time
	if err := inFlight.Where("lease_until IS NULL").Order("next_check_at").
		Pluck("next_check_at", &checks).Error; err != nil {
		return time.Time{}, false, fmt.Errorf("find the next check due: %w", err)
	}
	if err := inFlight.Where("lease_until IS NOT NULL").Order("lease_until").
		Pluck("lease_until", &leases).Error; err != nil {
		return time.Time{}, false, fmt.Errorf("find the next lease to end: %w", err)
	}
	for _, t := range append(checks, leases...) {
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	return next, ok, nil
}

// RenewLease extends owner's claim on a task it is still working on.
func (s *Store) RenewLease(ctx context.Context, taskID, owner string, lease time.Duration) error {
	err := s.db.W.WithContext(ctx).Exec("UPDATE tasks SET lease_until = ? WHERE id = ? AND lease_owner = ?",
		s.Now().Add(lease), taskID, owner).Error
	if err != nil {
		return fmt.Errorf("renew the lease on %s: %w", taskID, err)
	}
	return nil
}

// Unclaim releases owner's claim without counting a poll; the task is due again at next.
func (s *Store) Unclaim(ctx context.Context, taskID, owner string, next time.Time) error {
	err := s.db.W.WithContext(ctx).Exec("UPDATE tasks SET next_check_at = ?, lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?",
		next, taskID, owner).Error
	if err != nil {
		return fmt.Errorf("unclaim %s: %w", taskID, err)
	}
	return nil
}

// PastDeadline reads up to limit tasks past their queue deadline (still waiting for a credential) and up
// to limit past their run deadline (submitted, not finished).
func (s *Store) PastDeadline(ctx context.Context, limit int) (waiting, running []models.Task, err error) {
	now := s.Now()
	if err := s.db.R.WithContext(ctx).Where("status = ? AND credential_id IS NULL AND queue_deadline < ?", Queued, now).
		Limit(limit).Find(&waiting).Error; err != nil {
		return nil, nil, fmt.Errorf("find tasks past their queue deadline: %w", err)
	}
	if err := s.db.R.WithContext(ctx).Where("status IN ? AND credential_id IS NOT NULL AND run_deadline < ?", Unfinished, now).
		Limit(limit).Find(&running).Error; err != nil {
		return waiting, nil, fmt.Errorf("find tasks past their run deadline: %w", err)
	}
	return waiting, running, nil
}

// Get reads one task, whatever its account (for the worker and support; customers go through videos).
func (s *Store) Get(ctx context.Context, id string) (*models.Task, error) {
	var t models.Task
	if err := s.db.R.WithContext(ctx).Where("id = ?", id).Take(&t).Error; err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return &t, nil
}
