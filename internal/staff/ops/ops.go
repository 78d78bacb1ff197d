// Package ops reads the platform's operating figures for staff: the task queue now, tasks and charges
// per day, the upstream credentials' load and health, API errors per endpoint, the ledger self-check's
// last result, tasks overdue, the job queues (docs/jobs.md) and the last Stripe reconciliation.
// The staff overview (/support) and the Prometheus collector (/metrics) both read them here, so the two
// never disagree. Every read is an aggregate over an index, bounded by what it shows, never by the size
// of the tables: it runs on each page view and each scrape.
package ops

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/models"
)

// Queue is the tasks not finished yet, now.
type Queue struct {
	Waiting    int64 // queued, waiting for an upstream slot (the backlog)
	Submitted  int64 // queued upstream: holding a slot, not started there yet
	InProgress int64
	// OldestQueued is when the oldest queued task (waiting or submitted) was created; zero when none is.
	OldestQueued time.Time
}

// Queued is every task in status queued.
func (q Queue) Queued() int64 { return q.Waiting + q.Submitted }

// OldestAge is how long the oldest queued task has waited at now; 0 when none is queued.
func (q Queue) OldestAge(now time.Time) time.Duration {
	if q.OldestQueued.IsZero() {
		return 0
	}
	return max(now.Sub(q.OldestQueued), 0)
}

// The queue's conditions, in the words of the worker's partial indexes (tasks_waiting, tasks_inflight):
// SQLite uses a partial index only when the query repeats its condition.
const (
	waitingWhere = "status = 'queued' AND credential_id IS NULL"
	holdingWhere = "status IN ('queued', 'in_progress') AND credential_id IS NOT NULL"
)

// ReadQueue counts the unfinished tasks. Finished tasks are not counted here: their number only grows,
// and counting them would read the whole table; Daily counts them per day instead.
func ReadQueue(ctx context.Context, d *db.DB) (Queue, error) {
	var q Queue
	r := d.R.WithContext(ctx)
	if err := r.Model(&models.Task{}).Where(waitingWhere).Count(&q.Waiting).Error; err != nil {
		return q, fmt.Errorf("count waiting tasks: %w", err)
	}
	var holding []struct {
		Status string
		N      int64
	}
	if err := r.Raw("SELECT status, COUNT(*) AS n FROM tasks WHERE " + holdingWhere + " GROUP BY status").Scan(&holding).Error; err != nil {
		return q, fmt.Errorf("count tasks holding a slot: %w", err)
	}
	for _, h := range holding {
		switch h.Status {
		case tasks.Queued:
			q.Submitted = h.N
		case tasks.InProgress:
			q.InProgress = h.N
		}
	}
	// The column itself rather than MIN(created_at): SQLite then hands back a time, not the text it stores.
	for _, where := range []string{waitingWhere, holdingWhere + " AND status = 'queued'"} {
		var oldest []models.Task
		if err := r.Select("created_at").Where(where).Order("created_at").Limit(1).Find(&oldest).Error; err != nil {
			return q, fmt.Errorf("find the oldest queued task: %w", err)
		}
		if len(oldest) == 1 && (q.OldestQueued.IsZero() || oldest[0].CreatedAt.Before(q.OldestQueued)) {
			q.OldestQueued = oldest[0].CreatedAt
		}
	}
	return q, nil
}

// Credential is one upstream credential's load. Its secret is never read: the row does not hold it.
type Credential struct {
	ID, Provider, Label string
	InFlight            int
	MaxConcurrency      int
	Enabled             bool
}

// Credentials lists the upstream credentials, by label.
func Credentials(ctx context.Context, d *db.DB) ([]Credential, error) {
	var out []Credential
	if err := d.R.WithContext(ctx).Model(&models.UpstreamCredential{}).
		Select("id", "provider", "label", "in_flight", "max_concurrency", "enabled").Order("label, id").Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("read upstream credentials: %w", err)
	}
	return out, nil
}

// LastLedgerCheck returns the newest ledger self-check, or nil when none has run.
func LastLedgerCheck(ctx context.Context, d *db.DB) (*models.LedgerCheck, error) {
	var c models.LedgerCheck
	err := d.R.WithContext(ctx).Order("at DESC, id DESC").Take(&c).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the last ledger check: %w", err)
	}
	return &c, nil
}

// Overview is everything the staff overview shows, read at At.
type Overview struct {
	At          time.Time
	Queue       Queue
	Days        []Day // DailyDays UTC days ending today, oldest first
	Credentials []Credential
	Endpoints   []Endpoint // the last hour's API calls per endpoint, most errors first
	// EndpointsLeftOut is how many more endpoints had calls in the last hour than Endpoints lists.
	EndpointsLeftOut int
	LastCheck        *models.LedgerCheck // nil: the self-check never ran
	// Jobs is each job queue now, and JobErrors the newest errors of jobs retrying or given up.
	Jobs      []JobQueue
	JobErrors []JobError
}

// MaxJobErrors is how many of the jobs' last errors the overview lists.
const MaxJobErrors = 8

// MaxEndpoints is how many endpoints the overview lists; scanners probing random paths must not make
// the page endless.
const MaxEndpoints = 25

// Read gathers the overview at now.
func Read(ctx context.Context, d *db.DB, now time.Time) (*Overview, error) {
	o := &Overview{At: now}
	var err error
	if o.Queue, err = ReadQueue(ctx, d); err != nil {
		return nil, err
	}
	if o.Days, err = Daily(ctx, d, now, DailyDays); err != nil {
		return nil, err
	}
	if o.Credentials, err = Credentials(ctx, d); err != nil {
		return nil, err
	}
	if o.Endpoints, err = EndpointErrors(ctx, d, now.Add(-time.Hour)); err != nil {
		return nil, err
	}
	if len(o.Endpoints) > MaxEndpoints {
		o.EndpointsLeftOut = len(o.Endpoints) - MaxEndpoints
		o.Endpoints = o.Endpoints[:MaxEndpoints]
	}
	if o.LastCheck, err = LastLedgerCheck(ctx, d); err != nil {
		return nil, err
	}
	if o.Jobs, err = JobQueuesNow(ctx, d); err != nil {
		return nil, err
	}
	if o.JobErrors, err = LastJobErrors(ctx, d, MaxJobErrors); err != nil {
		return nil, err
	}
	return o, nil
}
