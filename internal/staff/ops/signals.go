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

// Outbox is the backlog of one outbox: messages neither delivered nor given up.
type Outbox struct {
	Name    string // "mail" or "webhook"; the label value of videogen_outbox_*
	Pending int64
	// Oldest is when the oldest pending message was queued; zero when none is.
	Oldest time.Time
}

// OldestAge is how long the oldest pending message has waited at now; 0 when none is pending.
func (o Outbox) OldestAge(now time.Time) time.Duration {
	if o.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(o.Oldest), 0)
}

// mailPending is the e-mail outbox's delivery index condition (mail_outbox_due), repeated word for word
// so that SQLite uses the partial index.
const mailPending = "sent_at IS NULL AND failed_at IS NULL"

// Outboxes reads the backlog of each outbox: the e-mail outbox, and the webhook outbox's deliveries that
// are due (webhookBacklog).
func Outboxes(ctx context.Context, d *db.DB, now time.Time) ([]Outbox, error) {
	mail := Outbox{Name: "mail"}
	r := d.R.WithContext(ctx)
	if err := r.Model(&models.MailOutbox{}).Where(mailPending).Count(&mail.Pending).Error; err != nil {
		return nil, fmt.Errorf("count pending e-mail: %w", err)
	}
	// The column itself rather than MIN(created_at): SQLite then hands back a time, not the text it stores.
	// Ordered as stored: the outbox writes every time in UTC, so SQLite's text order is the time order.
	var oldest []models.MailOutbox
	if err := r.Select("created_at").Where(mailPending).Order("created_at").Limit(1).Find(&oldest).Error; err != nil {
		return nil, fmt.Errorf("find the oldest pending e-mail: %w", err)
	}
	if len(oldest) == 1 {
		mail.Oldest = oldest[0].CreatedAt
	}
	hooks, err := webhookBacklog(ctx, d, now)
	if err != nil {
		return nil, err
	}
	return []Outbox{mail, hooks}, nil
}

// webhookBacklog is the webhook outbox's part that is ours to deliver: deliveries due now, to enabled
// endpoints. Oldest is when the longest-waiting of them fell due, so its age is
// how late our delivery runs. A customer's endpoint that is down does not count: its deliveries wait for
// their next retry, not due (docs/webhooks.md#delivery-and-retries).
func webhookBacklog(ctx context.Context, d *db.DB, now time.Time) (Outbox, error) {
	hooks := Outbox{Name: "webhook"}
	q := func() *gorm.DB {
		return d.R.WithContext(ctx).Table("webhook_deliveries AS d").Joins("JOIN webhook_endpoints e ON e.id = d.endpoint_id").
			Where("d.next_attempt_at IS NOT NULL AND d.next_attempt_at <= ? AND e.enabled = ?", now, true)
	}
	if err := q().Count(&hooks.Pending).Error; err != nil {
		return hooks, fmt.Errorf("count due webhook deliveries: %w", err)
	}
	var oldest []models.WebhookDelivery
	if err := q().Select("d.next_attempt_at").Order("d.next_attempt_at").Limit(1).Find(&oldest).Error; err != nil {
		return hooks, fmt.Errorf("find the longest-due webhook delivery: %w", err)
	}
	if len(oldest) == 1 && oldest[0].NextAttemptAt != nil {
		hooks.Oldest = *oldest[0].NextAttemptAt
	}
	return hooks, nil
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
