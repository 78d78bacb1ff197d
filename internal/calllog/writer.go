// Package calllog records every API request for the customer's call log, off the request path: rows are
// queued in memory and written in batches, and Close writes whatever is still queued.
package calllog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"videogen/internal/db"
	"videogen/models"
)

// Writer batches call-log rows into the database.
type Writer struct {
	db    *db.DB
	log   *slog.Logger
	queue chan models.CallLog
	batch int
	every time.Duration

	closeOnce sync.Once
	done      chan struct{}
}

// NewWriter starts a writer. Rows wait at most `every` before they are written.
func NewWriter(d *db.DB, log *slog.Logger) *Writer {
	w := &Writer{db: d, log: log, queue: make(chan models.CallLog, 65536), batch: 1000, every: 200 * time.Millisecond, done: make(chan struct{})}
	go w.loop()
	return w
}

// Record queues a row. When the queue is full it waits: a call log with gaps would be worse for a
// billing service than a request slowed under extreme load.
func (w *Writer) Record(row models.CallLog) {
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
		err = w.db.W.WithContext(ctx).CreateInBatches(buf, 500).Error
		cancel()
		if err == nil {
			return buf[:0]
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	w.log.Error("call log rows could not be written", "rows", len(buf), "err", err)
	return buf[:0]
}

// Close writes every queued row and stops. No Record may follow.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() { close(w.queue) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
