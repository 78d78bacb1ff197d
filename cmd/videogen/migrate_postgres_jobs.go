package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"

	"videogen/internal/infra/queue"
)

// River's tables are not copied row by row: their JSON columns are SQLite's binary JSONB on one side and
// PostgreSQL's jsonb on the other, and most of them (the leader, the clients, the queues, finished jobs)
// describe the instances that ran, not the installation. What the installation owes — the jobs not yet
// finished: e-mails to send, deliveries to make, events to process — is inserted into PostgreSQL by
// River itself, each with its kind, queue, arguments, priority, attempts left and due time
// (docs/backups.md, "Moving to PostgreSQL").

// isRiverTable reports whether a table is River's (copied by copyJobs, not copyTable).
func isRiverTable(name string) bool { return strings.HasPrefix(name, "river_") }

// rawJob is a job's arguments as stored: River inserts them as they are, under their kind.
type rawJob struct {
	kind string
	args json.RawMessage
}

func (j rawJob) Kind() string                 { return j.kind }
func (j rawJob) MarshalJSON() ([]byte, error) { return j.args, nil }

// copyJobs inserts the source's unfinished River jobs into the target's transaction and returns how many.
func copyJobs(ctx context.Context, src *sql.Tx, dst *sql.DB, ttx *sql.Tx) (int, error) {
	rows, err := src.QueryContext(ctx, `SELECT json(args), kind, queue, priority, max_attempts, attempt, scheduled_at
		FROM river_job WHERE state NOT IN ('completed', 'cancelled', 'discarded') ORDER BY id`)
	if err != nil {
		return 0, fmt.Errorf("read the unfinished jobs: %w", err)
	}
	defer rows.Close()
	var params []river.InsertManyParams
	for rows.Next() {
		var (
			args, kind, queueName      string
			at                         any // SQLite's driver reads a timestamp column as a time, or as text
			priority, maxAttempts, did int
		)
		if err := rows.Scan(&args, &kind, &queueName, &priority, &maxAttempts, &did, &at); err != nil {
			return 0, fmt.Errorf("read an unfinished job: %w", err)
		}
		due, err := queue.TimeOf(at)
		if err != nil {
			return 0, fmt.Errorf("a %s job's due time: %w", kind, err)
		}
		params = append(params, river.InsertManyParams{Args: rawJob{kind: kind, args: json.RawMessage(args)}, InsertOpts: &river.InsertOpts{
			Queue: queueName, Priority: priority, MaxAttempts: max(1, maxAttempts-did), ScheduledAt: due}})
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("read the unfinished jobs: %w", err)
	}
	if len(params) == 0 {
		return 0, nil
	}
	// An insert-only client: no queues, no workers, so no kind needs to be known here.
	client, err := river.NewClient(riverdatabasesql.New(dst), &river.Config{})
	if err != nil {
		return 0, fmt.Errorf("insert the unfinished jobs: %w", err)
	}
	if _, err := client.InsertManyTx(ctx, ttx, params); err != nil {
		return 0, fmt.Errorf("insert the unfinished jobs: %w", err)
	}
	return len(params), nil
}
