package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/upstream/status"
	"videogen/internal/infra/db"
	"videogen/models"
)

// The reads below are the figures the alert rules watch (deploy/prometheus/alerts.yml): things that
// should be zero or young, each small enough to read at every scrape.

// OverdueTasks counts the tasks in flight — holding an upstream slot, queued at the provider or in
// progress — whose run deadline is past at now. The deadline is set when a task is submitted, RUN_TIMEOUT
// after it (as RUN_TIMEOUT was then: lowering it does not make running tasks overdue), and the worker's
// sweep ends a task past it within seconds; a task that stays overdue means no sweep is running.
func OverdueTasks(ctx context.Context, d *db.DB, now time.Time) (int64, error) {
	var n int64
	// Times are compared in SQL as the sweep compares them (tasks.Store.PastDeadline): the task store
	// writes every deadline in UTC, so SQLite's text comparison orders them too.
	if err := d.R.WithContext(ctx).Model(&models.Task{}).Where(holdingWhere+" AND run_deadline < ?", now.UTC()).
		Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count overdue tasks: %w", err)
	}
	return n, nil
}

// Upstreams reads every upstream credential with what the live instances report of its health, as the
// staff overview shows it (status.Read within status.DefaultFresh): the worst breaker a live instance
// reports, and whether the provider refused the key or the account is out of credit.
func Upstreams(ctx context.Context, d *db.DB, now time.Time) ([]status.Row, error) {
	return status.Read(ctx, d, now, status.DefaultFresh) // its errors say which read failed
}

// LastReconcile returns the newest completed reconciliation with Stripe, or nil when none has run.
func LastReconcile(ctx context.Context, d *db.DB) (*models.StripeReconcileRun, error) {
	var run models.StripeReconcileRun
	err := d.R.WithContext(ctx).Order("at DESC, id DESC").Take(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the last Stripe reconciliation: %w", err)
	}
	return &run, nil
}
