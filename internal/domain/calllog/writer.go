// Package calllog records every API request for the customer's call log. Rows are group-committed, as a
// database commits its log: a request's Record returns once the transaction holding its row has
// committed, and one writer commits, in one transaction, every row that arrived while the previous one
// was committing (docs/decisions.md, "The call log is group-committed"). So no answered request's row is
// lost to a crash, and the rows of a busy server still cost one commit per batch, not one per request.
package calllog

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"videogen/internal/infra/db"
	"videogen/models"
)

const (
	// MaxBatch bounds the rows of one transaction: a batch's statements hold SQLite's one writer
	// connection, and every other write of the server waits behind them.
	MaxBatch = 1000
	// Patience is how long a request waits for its row while the database refuses it: the writer retries
	// a failed batch until this long after its first row arrived, then logs each row at error level and
	// lets the requests answer (docs/decisions.md).
	Patience = 5 * time.Second
	// attemptTimeout bounds one attempt. A database that is slow, not failing (a busy connection pool, a
	// lock), is waited for as every request's own statements wait for it: only errors count against
	// Patience.
	attemptTimeout = 30 * time.Second
)

// Config tunes the writer; the zero value is the server's.
type Config struct {
	MaxBatch int           // rows per transaction at most (0: MaxBatch)
	Patience time.Duration // how long a batch is retried, from its first row's arrival (0: Patience)
}

// Stats are the writer's counts since it was made, for tests and benchmarks.
type Stats struct {
	Batches int64 // transactions committed
	Rows    int64 // rows committed
	Largest int   // rows of the largest batch committed
	Waiting int   // rows recorded and neither committed nor given up yet
	Failed  int64 // attempts to commit a batch that failed
	Lost    int64 // rows given up after Patience (each logged at error level)
}

// Writer group-commits call-log rows.
type Writer struct {
	db  *db.DB
	log *slog.Logger
	cfg Config

	mu     sync.Mutex
	queue  []*batch // waiting to be committed, oldest first; only the last one takes new rows
	closed bool
	stats  Stats
	spare  [][]models.CallLog // row slices of committed batches, for the next ones
	cols   columns            // PostgreSQL's scratch, the writer loop's alone
	conn   *sql.Conn          // PostgreSQL: the writer loop's own connection, nil until needed or after an error
	down   bool               // the last batch was given up (the writer loop's alone)

	wake chan struct{} // (capacity 1) a batch was queued, or the writer closed
	done chan struct{} // closed when Run has returned
}

// batch is the rows of one transaction and the requests waiting for it.
type batch struct {
	rows   []models.CallLog
	opened time.Time     // when its first row arrived: Patience counts from here
	done   chan struct{} // closed once the rows are committed or given up
}

// NewWriter returns a writer with the server's settings. Run must be running for Record to return.
func NewWriter(d *db.DB, log *slog.Logger) *Writer { return NewWriterWith(Config{}, d, log) }

// NewWriterWith returns a writer with cfg.
func NewWriterWith(cfg Config, d *db.DB, log *slog.Logger) *Writer {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = MaxBatch
	}
	if cfg.Patience <= 0 {
		cfg.Patience = Patience
	}
	return &Writer{db: d, log: log, cfg: cfg, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Run commits recorded rows until ctx ends or Close is called, then commits whatever is still waiting
// and returns. It runs as one of the server's background parts, stopped once the HTTP server has: no
// request waits for a row by then.
func (w *Writer) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, w.stopAccepting)
	defer stop()
	w.loop()
	return nil
}

// Record returns once row is committed — or, when the database refused it for Patience, once it has been
// logged at error level. It never fails the request: its answer may already have moved money. There is
// no context: a request that stopped waiting would answer with its row still unwritten, and the wait is
// bounded anyway (Patience for a failing database, 30 s an attempt for a slow one).
func (w *Writer) Record(row models.CallLog) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		// Only a request that outlived the shutdown deadline gets here; say so rather than lose it quietly.
		w.logLost("call log already closed; row not written", row, nil)
		return
	}
	var b *batch
	if n := len(w.queue); n > 0 && len(w.queue[n-1].rows) < w.cfg.MaxBatch {
		b = w.queue[n-1]
	} else {
		b = &batch{opened: time.Now(), done: make(chan struct{})}
		if n := len(w.spare); n > 0 {
			b.rows, w.spare = w.spare[n-1], w.spare[:n-1]
		}
		w.queue = append(w.queue, b)
		w.signal() // the writer may be idle; it sees every batch queued after this one on its own
	}
	b.rows = append(b.rows, row)
	w.stats.Waiting++
	w.mu.Unlock()
	<-b.done
}

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

func (w *Writer) signal() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// loop commits the oldest batch, over and over. While it commits, the requests that arrive fill the
// next batch, which it takes at once when done: no timer, so a lone row on an idle server is committed
// as soon as it arrives, and a busy server's commits grow to what arrives during one.
func (w *Writer) loop() {
	defer close(w.done)
	defer func() {
		if w.conn != nil {
			_ = w.conn.Close() // back to the pool, before the server closes the database
		}
	}()
	for {
		w.mu.Lock()
		if len(w.queue) == 0 {
			closed := w.closed
			w.mu.Unlock()
			if closed {
				return
			}
			<-w.wake
			continue
		}
		b := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		w.commit(b)
	}
}

// commit writes b in one transaction, retrying a failed attempt with a growing pause until Patience
// after its first row arrived — or, right after a batch was given up, trying it once; past that it logs
// each row at error level. Either way it then wakes b's requests.
func (w *Writer) commit(b *batch) {
	deadline := b.opened.Add(w.cfg.Patience)
	if w.down {
		// The last batch was given up, and none has committed since: the database is down, and a batch
		// gets one attempt, so that requests are not each held Patience through an outage.
		deadline = time.Time{}
	}
	pause := 10 * time.Millisecond
	var err error
	for {
		ctx, cancel := context.WithTimeout(context.Background(), attemptTimeout)
		err = w.write(ctx, b.rows)
		cancel()
		if err == nil {
			break
		}
		w.mu.Lock()
		w.stats.Failed++
		w.mu.Unlock()
		if time.Now().Add(pause).After(deadline) {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, 500*time.Millisecond)
	}
	if err == nil && w.down {
		w.log.Info("call log: the database takes rows again")
	}
	w.down = err != nil
	if err != nil {
		w.log.Error("call-log batch not committed; its rows follow", "rows", len(b.rows), "err", err)
		for _, r := range b.rows {
			w.logLost("call-log row not written", r, err)
		}
	}
	w.mu.Lock()
	w.stats.Waiting -= len(b.rows)
	if err == nil {
		w.stats.Batches++
		w.stats.Rows += int64(len(b.rows))
		w.stats.Largest = max(w.stats.Largest, len(b.rows))
	} else {
		w.stats.Lost += int64(len(b.rows))
	}
	rows := b.rows
	b.rows = nil
	close(b.done)
	clear(rows)
	w.spare = append(w.spare, rows[:0])
	w.mu.Unlock()
}

// logLost writes a row that could not be stored, every field of it (none is secret: the key's display
// prefix, never the key), so that it can be found in the log and restored by hand.
func (w *Writer) logLost(msg string, r models.CallLog, err error) {
	var account any
	if r.AccountID != nil {
		account = *r.AccountID
	}
	w.log.Error(msg, "request_id", r.RequestID, "at", r.At.UTC().Format(time.RFC3339Nano), "account_id", account,
		"key_prefix", r.KeyPrefix, "method", r.Method, "path", r.Path, "status", r.Status, "error_code", r.ErrorCode,
		"latency_micros", r.LatencyMicros, "task_id", r.TaskID, "amount_reserved_micros", r.AmountReservedMicros,
		"bytes_in", r.BytesIn, "files", r.Files, "err", err)
}

// write inserts rows in one transaction.
func (w *Writer) write(ctx context.Context, rows []models.CallLog) error {
	if w.db.Postgres {
		return w.insertColumns(ctx, rows)
	}
	return w.insertChunks(ctx, rows)
}

// insertUnnest writes a whole batch on PostgreSQL with one statement — its own transaction, one round
// trip — whatever its size: the rows go as 14 arrays, one per column, which unnest turns back into rows.
// The statement's text never changes, so pgx prepares it once per connection. The writer keeps a
// connection of its own: every answer waits for its commit, which must not queue behind the requests
// for the pool's connections (40, held through create transactions under load).
const insertUnnest = `INSERT INTO call_logs (at, request_id, account_id, key_prefix, method, path, status, error_code,
	latency_micros, task_id, amount_reserved_micros, bytes_in, files, error_message)
	SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::integer[],
		$8::text[], $9::bigint[], $10::text[], $11::bigint[], $12::bigint[], $13::integer[], $14::text[])`

// columns are a batch's values column by column, kept between batches (only the writer's loop uses them).
type columns struct {
	at                                                    []time.Time
	account                                               []*int64
	requestID, keyPrefix, method, path, errorCode, taskID []string
	errorMessage                                          []string
	status, files                                         []int32
	latency, amount, bytesIn                              []int64
}

func (w *Writer) insertColumns(ctx context.Context, rows []models.CallLog) error {
	c := &w.cols
	c.at, c.account = c.at[:0], c.account[:0]
	c.requestID, c.keyPrefix, c.method, c.path, c.errorCode, c.taskID = c.requestID[:0], c.keyPrefix[:0], c.method[:0], c.path[:0], c.errorCode[:0], c.taskID[:0]
	c.errorMessage = c.errorMessage[:0]
	c.status, c.files = c.status[:0], c.files[:0]
	c.latency, c.amount, c.bytesIn = c.latency[:0], c.amount[:0], c.bytesIn[:0]
	for i := range rows {
		r := &rows[i]
		c.at = append(c.at, r.At)
		c.requestID = append(c.requestID, r.RequestID)
		c.account = append(c.account, r.AccountID)
		c.keyPrefix = append(c.keyPrefix, r.KeyPrefix)
		c.method = append(c.method, r.Method)
		c.path = append(c.path, r.Path)
		c.status = append(c.status, int32(r.Status))
		c.errorCode = append(c.errorCode, r.ErrorCode)
		c.errorMessage = append(c.errorMessage, r.ErrorMessage)
		c.latency = append(c.latency, r.LatencyMicros)
		c.taskID = append(c.taskID, r.TaskID)
		c.amount = append(c.amount, r.AmountReservedMicros)
		c.bytesIn = append(c.bytesIn, r.BytesIn)
		c.files = append(c.files, int32(r.Files))
	}
	if w.conn == nil {
		conn, err := w.db.WSQL().Conn(ctx)
		if err != nil {
			return fmt.Errorf("connect for the call log: %w", err)
		}
		w.conn = conn
	}
	_, err := w.conn.ExecContext(ctx, insertUnnest, c.at, c.requestID, c.account, c.keyPrefix, c.method, c.path,
		c.status, c.errorCode, c.latency, c.taskID, c.amount, c.bytesIn, c.files, c.errorMessage)
	clear(c.account) // the rows' pointers, kept no longer than the rows
	if err != nil {
		// The connection may be what failed: the next attempt takes a fresh one.
		_ = w.conn.Close()
		w.conn = nil
		return fmt.Errorf("insert call-log rows: %w", err)
	}
	return nil
}

const callLogColumns = `INSERT INTO call_logs (at, request_id, account_id, key_prefix, method, path, status, error_code,
	latency_micros, task_id, amount_reserved_micros, bytes_in, files, error_message) VALUES `

const rowPlaceholders = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// sqliteRowsPerInsert balances SQLite's two costs: its driver compiles the SQL on every execution (one
// row per statement pays a compile per row) and binds parameters in time quadratic in their number (one
// statement for a whole batch pays that). 16 rows = 224 parameters per statement.
const sqliteRowsPerInsert = 16

var insertChunk = callLogColumns + strings.TrimSuffix(strings.Repeat(rowPlaceholders+", ", sqliteRowsPerInsert), ", ")

// insertChunks writes rows on SQLite, 16 to a statement, in one transaction on the single writer
// connection, without GORM's per-row reflection (it matters at tens of thousands of rows a second).
func (w *Writer) insertChunks(ctx context.Context, rows []models.CallLog) error {
	tx, err := w.db.WSQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin call-log batch: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	args := make([]any, 0, 14*sqliteRowsPerInsert)
	for len(rows) > 0 {
		n := min(len(rows), sqliteRowsPerInsert)
		q := insertChunk
		if n < sqliteRowsPerInsert {
			q = callLogColumns + strings.TrimSuffix(strings.Repeat(rowPlaceholders+", ", n), ", ")
		}
		args = args[:0]
		for _, r := range rows[:n] {
			args = append(args, r.At.UTC(), r.RequestID, r.AccountID, r.KeyPrefix, r.Method, r.Path, r.Status,
				r.ErrorCode, r.LatencyMicros, r.TaskID, r.AmountReservedMicros, r.BytesIn, r.Files, r.ErrorMessage)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert call-log rows: %w", err)
		}
		rows = rows[n:]
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit call-log batch: %w", err)
	}
	return nil
}

// stopAccepting closes the writer: Run commits what is waiting and returns; a later Record is logged, not
// written.
func (w *Writer) stopAccepting() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.signal()
}

// Close stops accepting rows and waits, until ctx ends, for Run to commit every waiting row. No Record may
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
