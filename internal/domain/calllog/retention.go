package calllog

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/infra/runner"
)

// RetentionBatch is how many rows one DELETE removes: each is its own short statement, so the call log's writer
// and every other writer get their turn between batches (SQLite has one writer at a time).
const RetentionBatch = 5000

// The call log is kept to its retention (CALL_LOG_RETENTION): rows older than it are deleted, by one
// instance at a time, in small batches so that neither engine holds a long lock on a table every API
// request writes to. Only call_logs is touched: the ledger and the audit log are kept for good.

// RetentionConfig tunes the sweep.
type RetentionConfig struct {
	Owner     string        // this instance's name, noted on the sweeps it runs
	Retention time.Duration // CALL_LOG_RETENTION
	Every     time.Duration // how often instances ask whether a sweep is due (MEDIA_SWEEP_INTERVAL)
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

// Job sweeps at start, then once per interval on whichever instance claims the turn. It asks twice per
// interval, so a turn is never missed by a tick arriving a hair early.
func (s *Sweeper) Job() runner.Every {
	return runner.Every{Interval: max(s.cfg.Every/2, time.Millisecond), AtStart: true, Job: func(ctx context.Context) {
		if n, err := s.SweepIfDue(ctx); err != nil && ctx.Err() == nil {
			s.Log.Error("call-log retention", "err", err)
		} else if n > 0 {
			s.Log.Info("deleted call-log rows past their retention", "rows", n, "retention", s.cfg.Retention)
		}
	}}
}

// SweepIfDue runs Sweep when no instance has in the last interval (db.ClaimRun: of several instances
// asking at once, one sweeps) and returns how many rows it deleted.
func (s *Sweeper) SweepIfDue(ctx context.Context) (int64, error) {
	now := s.Now().UTC().Truncate(time.Microsecond)
	claimed, err := s.DB.ClaimRun(ctx, "call_log_retention", s.cfg.Owner, s.cfg.Every, now)
	if err != nil || !claimed {
		return 0, err
	}
	return s.Sweep(ctx, now)
}

// Sweep deletes every call-log row older than the retention at now, a batch at a time (oldest first,
// by the call_logs_at index), until none is left or ctx ends. Deleting twice is harmless, so an instance
// that overruns its turn does no damage.
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
