// Package calllog records every API request for the customer's call log, off the request path: rows are
// queued in memory and written in batches, and Close writes whatever is still queued.
package calllog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/models"
)

// Writer batches call-log rows into the database.
type Writer struct {
	db    *db.DB
	log   *slog.Logger
	queue chan models.CallLog
	batch int
	every time.Duration

	mu     sync.RWMutex // Record holds it shared; Close exclusively, so no row is sent on a closed queue
	closed bool
	done   chan struct{}
}

// NewWriter returns a writer; Run writes what Record queues. Rows wait at most `every` before they are
// written.
func NewWriter(d *db.DB, log *slog.Logger) *Writer {
	return &Writer{db: d, log: log, queue: make(chan models.CallLog, 65536), batch: 1000, every: 200 * time.Millisecond, done: make(chan struct{})}
}

// Run writes queued rows until ctx ends or Close is called, then writes whatever is still queued and
// returns. It runs as one of the server's background parts, the last to stop: no request runs by then.
func (w *Writer) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { w.stopAccepting() })
	defer stop()
	w.loop()
	return nil
}

// Record queues a row. When the queue is full it waits: a call log with gaps would be worse for a
// billing service than a request slowed under extreme load.
func (w *Writer) Record(row models.CallLog) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		// Only a request that outlived the shutdown deadline gets here; say so rather than lose it quietly.
		w.log.Warn("call log already closed; row not written", "request_id", row.RequestID, "path", row.Path, "status", row.Status)
		return
	}
	w.queue <- row
}

func (w *Writer) loop() {
	defer close(w.done)
	buf := make([]models.CallLog, 0, w.batch)
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case row, ok := <-w.queue:
			if !ok {
				w.flush(buf)
				return
			}
			buf = append(buf, row)
			if len(buf) >= w.batch {
				buf = w.flush(buf)
			}
		case <-t.C:
			buf = w.flush(buf)
		}
	}
}

// flush writes buf, retrying a failed write a few times before it gives the rows up to the log.
func (w *Writer) flush(buf []models.CallLog) []models.CallLog {
	if len(buf) == 0 {
		return buf
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if w.db.Postgres {
			// Multi-row INSERTs save round trips.
			err = w.db.Tx(ctx, func(tx *gorm.DB) error { return tx.CreateInBatches(buf, 200).Error })
		} else {
			err = w.insertChunks(ctx, buf)
		}
		cancel()
		if err == nil {
			return buf[:0]
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	w.log.Error("call log rows could not be written", "rows", len(buf), "err", err)
	return buf[:0]
}

const callLogColumns = `INSERT INTO call_logs (at, request_id, account_id, key_prefix, method, path, status, error_code,
	latency_micros, task_id, amount_reserved_micros, bytes_in, files) VALUES `

const rowPlaceholders = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// sqliteRowsPerInsert balances SQLite's two costs: its driver compiles the SQL on every execution (one
// row per statement pays a compile per row) and binds parameters in time quadratic in their number (one
// statement for a whole batch pays that). 16 rows = 208 parameters per statement.
const sqliteRowsPerInsert = 16

var insertChunk = callLogColumns + strings.TrimSuffix(strings.Repeat(rowPlaceholders+", ", sqliteRowsPerInsert), ", ")

// insertChunks writes rows on SQLite, 16 to a statement, in one transaction, without GORM's per-row
// reflection (it matters at tens of thousands of rows a second).
func (w *Writer) insertChunks(ctx context.Context, rows []models.CallLog) error {
	tx, err := w.db.WSQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin call-log batch: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	args := make([]any, 0, 13*sqliteRowsPerInsert)
	for len(rows) > 0 {
		n := min(len(rows), sqliteRowsPerInsert)
		q := insertChunk
		if n < sqliteRowsPerInsert {
			q = callLogColumns + strings.TrimSuffix(strings.Repeat(rowPlaceholders+", ", n), ", ")
		}
		args = args[:0]
		for _, r := range rows[:n] {
			args = append(args, r.At.UTC(), r.RequestID, r.AccountID, r.KeyPrefix, r.Method, r.Path, r.Status,
				r.ErrorCode, r.LatencyMicros, r.TaskID, r.AmountReservedMicros, r.BytesIn, r.Files)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert call-log rows: %w", err)
		}
		rows = rows[n:]
	}
	return tx.Commit()
}

// stopAccepting closes the queue: Run writes what is in it and returns; a later Record is logged, not
// queued.
func (w *Writer) stopAccepting() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
}

// Close stops accepting rows and waits, until ctx ends, for Run to write every queued row. No Record may
// follow.
func (w *Writer) Close(ctx context.Context) error {
	w.stopAccepting()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
