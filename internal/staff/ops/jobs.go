package ops

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
)

// JobQueues are River's queues, in the order the overview lists them (docs/jobs.md).
var JobQueues = []string{queue.Mail, queue.Webhooks, queue.Payments, queue.Chores}

// JobStates are the job states the overview and videogen_jobs count: those still to run, and those given
// up (kept 30 days). Completed jobs are not counted: a week of them is every e-mail and delivery sent.
var JobStates = []string{"available", "running", "retryable", "scheduled", "discarded"}

// JobQueue is one job queue now.
type JobQueue struct {
	Name   string
	States map[string]int64 // by JobStates
	// OldestAvailable is since when the longest-due job ready to run has waited for a worker; zero when
	// none waits. A queue whose due jobs wait minutes has no instance working it.
	OldestAvailable time.Time
}

// Waiting is how long the longest-due ready job has waited at now; 0 when none waits.
func (q JobQueue) Waiting(now time.Time) time.Duration {
	if q.OldestAvailable.IsZero() {
		return 0
	}
	return max(now.Sub(q.OldestAvailable), 0)
}

// JobError is the last error of a job retrying or given up.
type JobError struct {
	Queue, Kind, State string
	Attempt            int
	At                 time.Time
	Error              string
}

// JobQueuesNow counts each queue's jobs by state and finds its longest-due ready job.
func JobQueuesNow(ctx context.Context, d *db.DB) ([]JobQueue, error) {
	qs := make([]JobQueue, len(JobQueues))
	for i, name := range JobQueues {
		qs[i] = JobQueue{Name: name, States: map[string]int64{}}
	}
	var counts []struct {
		Queue, State string
		N            int64
	}
	if err := d.R.WithContext(ctx).Raw(`SELECT queue, CAST(state AS TEXT) AS state, COUNT(*) AS n FROM river_job
		WHERE state IN ? GROUP BY queue, state`, JobStates).Scan(&counts).Error; err != nil {
		return nil, fmt.Errorf("count the jobs: %w", err)
	}
	for _, c := range counts {
		if i := slices.Index(JobQueues, c.Queue); i >= 0 {
			qs[i].States[c.State] = c.N
		}
	}
	for i := range qs {
		var at []any
		if err := d.R.WithContext(ctx).Raw(`SELECT scheduled_at FROM river_job WHERE state = 'available' AND queue = ?
			ORDER BY scheduled_at LIMIT 1`, qs[i].Name).Scan(&at).Error; err != nil {
			return nil, fmt.Errorf("find the longest-due %s job: %w", qs[i].Name, err)
		}
		if len(at) == 1 {
			t, err := queue.TimeOf(at[0])
			if err != nil {
				return nil, fmt.Errorf("the longest-due %s job: %w", qs[i].Name, err)
			}
			qs[i].OldestAvailable = t
		}
	}
	return qs, nil
}

// LastJobErrors is the newest errors of jobs retrying or given up, newest first, at most limit.
func LastJobErrors(ctx context.Context, d *db.DB, limit int) ([]JobError, error) {
	// The last entry of the job's errors: a JSON array on SQLite, an array of jsonb on PostgreSQL.
	last := "json_extract(errors, '$[#-1].error')"
	if d.Postgres {
		last = "errors[array_upper(errors, 1)]->>'error'"
	}
	rows, err := d.R.WithContext(ctx).Raw(`SELECT queue, kind, CAST(state AS TEXT), attempt, attempted_at, `+last+`
		FROM river_job WHERE state IN ('retryable', 'discarded') AND errors IS NOT NULL
		ORDER BY attempted_at DESC LIMIT ?`, limit).Rows()
	if err != nil {
		return nil, fmt.Errorf("read the jobs' last errors: %w", err)
	}
	defer rows.Close()
	var out []JobError
	for rows.Next() {
		var (
			e   JobError
			at  any // a time, or River's text on SQLite
			msg sql.NullString
		)
		if err := rows.Scan(&e.Queue, &e.Kind, &e.State, &e.Attempt, &at, &msg); err != nil {
			return nil, fmt.Errorf("read a job's last error: %w", err)
		}
		e.At, _ = queue.TimeOf(at) // an unreadable time shows none
		e.Error = msg.String
		out = append(out, e)
	}
	return out, rows.Err()
}
