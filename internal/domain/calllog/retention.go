package calllog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
)

// RetentionBatch is how many rows one DELETE removes: each is its own short statement, so the call log's writer
// and every other writer get their turn between batches (SQLite has one writer at a time).
const RetentionBatch = 5000

// The call log is kept to its retention (CALL_LOG_RETENTION): rows older than it are deleted by a
// periodic job of the chores queue (docs/jobs.md, "Periodic chores"), in small batches so that neither
// engine holds a long lock on a table every API request writes to. Only call_logs is touched: the ledger
// and the audit log are kept for good.

// RetentionConfig tunes the sweep.
type RetentionConfig struct {
	Retention time.Duration // CALL_LOG_RETENTION
	Every     time.Duration // how often it is swept (MEDIA_SWEEP_INTERVAL)
	Batch     int           // rows per DELETE (0: RetentionBatch)
}

// RetentionDeps are what the sweep deletes from and tells.
type RetentionDeps struct {
	DB  *db.DB
	Log *slog.Logger
	Now func() time.Time // the clock
}

// Sweeper deletes call-log rows past their retention.
type Sweeper struct {
	RetentionDeps
	cfg RetentionConfig
}

// NewSweeper returns a sweeper.
func NewSweeper(cfg RetentionConfig, d RetentionDeps) *Sweeper {
	if cfg.Batch <= 0 {
		cfg.Batch = RetentionBatch
	}
	return &Sweeper{RetentionDeps: d, cfg: cfg}
}

// RetentionArgs is the job of one call-log retention sweep.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "call_log_retention" }

// InsertOpts: a sweep is not retried; the next interval's is (docs/jobs.md).
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Chores, MaxAttempts: 1}
}

// Schedule registers the sweep's worker with q and runs it on the leader every interval, and when a
// leader starts.
func (s *Sweeper) Schedule(q *queue.Queue) {
	queue.Add(q, &retentionWorker{s: s})
	q.Every(s.cfg.Every, func() river.JobArgs { return RetentionArgs{} })
}

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	s *Sweeper
}

// Timeout: a backlog (the first sweep after the retention was shortened) is deleted a turn at a time,
// each until the next is due and at least a minute; the batches already deleted stay deleted.
func (w *retentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration {
	return max(w.s.cfg.Every, time.Minute)
}

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	s := w.s
	n, err := s.Sweep(ctx, s.Now())
	if n > 0 {
		s.Log.Info("deleted call-log rows past their retention", "rows", n, "retention", s.cfg.Retention)
	}
	if err != nil && ctx.Err() == nil {
		s.Log.Error("call-log retention", "err", err)
	}
	return err
}

// Sweep deletes every call-log row older than the retention at now, a batch at a time (oldest first,
// by the call_logs_at index), until none is left or ctx ends. Deleting twice is harmless, so a sweep
// that overruns its turn, beside the next, does no damage.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) (int64, error) {
	cutoff := now.UTC().Add(-s.cfg.Retention)
	var total int64
	for {
		res := s.DB.W.WithContext(ctx).Exec(`DELETE FROM call_logs WHERE id IN (
			SELECT id FROM call_logs WHERE at < ? ORDER BY at LIMIT ?)`, cutoff, s.cfg.Batch)
		if res.Error != nil {
			return total, fmt.Errorf("delete call-log rows before %s: %w", cutoff.Format(time.RFC3339), res.Error)
		}
		total += res.RowsAffected
		if res.RowsAffected < int64(s.cfg.Batch) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}
