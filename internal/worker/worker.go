// Package worker moves tasks through their life: it submits queued tasks upstream on the least-loaded
// credential with room, polls them with growing intervals, copies finished videos into the platform's
// storage, and settles or releases their billing — exactly once, however many instances run it.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/billing"
	"videogen/internal/blob"
	"videogen/internal/db"
	"videogen/internal/ids"
	"videogen/internal/storetext"
	"videogen/internal/upstream"
	"videogen/models"
)

// Config tunes the worker.
type Config struct {
	ID              string        // name of this instance in leases
	PollMin         time.Duration // first poll interval
	PollMax         time.Duration // longest poll interval
	Lease           time.Duration // how long a claim holds a task
	RunTimeout      time.Duration // submitted → terminal deadline
	OutputRetention time.Duration // how long outputs stay downloadable
	Batch           int           // tasks claimed per round
	Parallel        int           // tasks handled at once
}

// Worker is one instance's task runner.
type Worker struct {
	cfg   Config
	db    *db.DB
	pool  *upstream.Pool
	blobs blob.Store
	log   *slog.Logger
	now   func() time.Time
	wake  chan struct{}

	// OnChange, when set, is called after every committed change a client can see (status, progress),
	// so caches of this instance drop the task at once.
	OnChange func(accountID int64, taskID string)
	// Inputs, when set, gives a task's media as freshly signed URLs at submission (media.SignedInputs),
	// so a task that waited in the queue never sends an expired URL; unset, the stored inputs are sent.
	Inputs func(ctx context.Context, taskID string) (models.TaskInputs, error)
}

func (w *Worker) changed(t *models.Task) {
	if w.OnChange != nil {
		w.OnChange(t.AccountID, t.ID)
	}
}

// New returns a worker. now is the clock (nil: real time).
func New(cfg Config, d *db.DB, pool *upstream.Pool, blobs blob.Store, log *slog.Logger, now func() time.Time) *Worker {
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if now == nil {
		now = time.Now
	}
	return &Worker{cfg: cfg, db: d, pool: pool, blobs: blobs, log: log, now: now, wake: make(chan struct{}, 1)}
}

func (w *Worker) clock() time.Time { return w.now().UTC().Truncate(time.Microsecond) }

// Notify wakes the worker early, e.g. after a task was created. It never blocks.
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run works until ctx ends, then finishes the tasks it holds and returns. It is a pipeline: up to
// Parallel tasks are handled at once, each on its own, and a free handler claims the next due task at
// once — one slow task (a long download) never holds the others back. Work in progress runs on its own
// context so that a shutdown never abandons a submission half-recorded.
func (w *Worker) Run(ctx context.Context) {
	work := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.sweepLoop(ctx, work)
	}()

	tick := min(max(w.cfg.PollMin/2, 10*time.Millisecond), 500*time.Millisecond)
	// Creates wake the worker; under a burst of them, claims are spaced so the queue is not re-read for
	// every single create.
	gap := min(max(w.cfg.PollMin/10, 5*time.Millisecond), 50*time.Millisecond)
	t := time.NewTicker(tick)
	defer t.Stop()
	handlers := make(chan struct{}, w.cfg.Parallel)
	for {
		claimed := time.Now()
		if free := cap(handlers) - len(handlers); free > 0 {
			tasks, err := w.Claim(work, min(free, w.cfg.Batch))
			if err != nil {
				w.log.Error("claim tasks", "err", err)
			}
			for i := range tasks {
				handlers <- struct{}{}
				wg.Add(1)
				go func(t models.Task) {
					defer func() {
						<-handlers
						wg.Done()
						w.Notify() // a handler is free: look for more work now
					}()
					w.handle(work, &t)
				}(tasks[i])
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-t.C:
		}
		if wait := gap - time.Since(claimed); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

// sweepLoop runs the deadline and retention sweep on its own timer, so it is never delayed by tasks.
func (w *Worker) sweepLoop(ctx, work context.Context) {
	every := min(max(w.cfg.PollMin*2, 20*time.Millisecond), 2*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.sweep(work)
		}
	}
}

// Claim leases due tasks: those in flight whose next check is due, and as many waiting tasks (oldest
// first) as the pool has free slots. On PostgreSQL, FOR UPDATE SKIP LOCKED lets instances claim side by
// side without ever taking the same task; on SQLite the single writer serialises claims.
func (w *Worker) Claim(ctx context.Context, limit int) ([]models.Task, error) {
	now := w.clock()
	until := now.Add(w.cfg.Lease)
	lock := ""
	if w.db.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var out []models.Task
	inFlight := "SELECT id FROM tasks WHERE status IN ('queued', 'in_progress') AND credential_id IS NOT NULL" +
		" AND next_check_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_check_at LIMIT ?" + lock
	if err := w.db.W.WithContext(ctx).Raw("UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE id IN ("+inFlight+") RETURNING *",
		w.cfg.ID, until, now, now, limit).Scan(&out).Error; err != nil {
		return nil, fmt.Errorf("claim in-flight tasks: %w", err)
	}
	limit -= len(out)
	if limit <= 0 {
		return out, nil
	}

	var free int64
	if err := w.db.R.WithContext(ctx).Model(&models.UpstreamCredential{}).
		Where("enabled = ? AND id IN ?", true, w.pool.IDs()).
		Select("COALESCE(SUM(max_concurrency - in_flight), 0)").Scan(&free).Error; err != nil {
		return nil, fmt.Errorf("count free slots: %w", err)
	}
	if free <= 0 {
		return out, nil
	}
	var waiting []models.Task
	queued := "SELECT id FROM tasks WHERE status = 'queued' AND credential_id IS NULL" +
		" AND next_check_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY created_at, id LIMIT ?" + lock
	if err := w.db.W.WithContext(ctx).Raw("UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE id IN ("+queued+") RETURNING *",
		w.cfg.ID, until, now, now, min(free, int64(limit))).Scan(&waiting).Error; err != nil {
		return nil, fmt.Errorf("claim queued tasks: %w", err)
	}
	return append(out, waiting...), nil
}

// A copy of an output from the upstream is abandoned after downloadIdle without a byte, or after
// downloadTimeout in all, so a stalled transfer cannot hold a handler; the next poll starts a fresh copy.
const (
	downloadIdle    = time.Minute
	downloadTimeout = 30 * time.Minute
)

func (w *Worker) handle(ctx context.Context, t *models.Task) {
	log := w.log.With("task", t.ID)
	defer w.keepLease(ctx, t)()
	if t.CredentialID == nil {
		cred, ok, err := w.acquireSlot(ctx, t)
		if err != nil {
			log.Error("assign credential", "err", err)
		}
		if !ok {
			w.unclaim(ctx, t, w.clock().Add(w.cfg.PollMin))
			return
		}
		w.submit(ctx, t, cred)
		return
	}
	cred, ok := w.pool.Credential(*t.CredentialID)
	if !ok {
		// The credential was removed from the configuration: nobody else may poll this task, so it waits
		// for an operator (or its run deadline).
		log.Error("task's credential is not configured on this instance", "credential", *t.CredentialID)
		w.unclaim(ctx, t, w.clock().Add(w.cfg.PollMax))
		return
	}
	if t.UpstreamTaskID == nil {
		if err := w.recordAttempt(ctx, t); err != nil {
			log.Error("record submission attempt", "err", err)
			w.unclaim(ctx, t, w.clock().Add(w.cfg.PollMin))
			return
		}
		w.submit(ctx, t, cred)
		return
	}
	st, err := w.pool.Provider.Poll(ctx, cred, *t.UpstreamTaskID)
	if err != nil {
		// A lost poll is not a failure: try again later, further apart each time.
		log.Warn("poll upstream", "err", err)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	w.apply(ctx, t, cred, st)
}

// keepLease renews the claim on t every third of the lease while the task is being handled, so slow but
// live work (a long download) is never taken over by another instance, while a crashed instance's
// tasks still come free within one lease. It returns the function that stops the renewal.
func (w *Worker) keepLease(ctx context.Context, t *models.Task) func() {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(w.cfg.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				err := w.db.W.WithContext(ctx).Exec("UPDATE tasks SET lease_until = ? WHERE id = ? AND lease_owner = ?",
					w.clock().Add(w.cfg.Lease), t.ID, w.cfg.ID).Error
				if err != nil {
					w.log.Warn("renew lease", "task", t.ID, "err", err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// acquireSlot picks the least-loaded credential with room, counts the task against it and records the
// submission attempt with a fresh idempotency key, all in one transaction, before any upstream call.
func (w *Worker) acquireSlot(ctx context.Context, t *models.Task) (upstream.Credential, bool, error) {
	now := w.clock()
	key := ids.NewUpstreamIdempotencyKey()
	var cred models.UpstreamCredential
	err := w.db.Tx(ctx, func(tx *gorm.DB) error {
		q := tx.Where("enabled = ? AND in_flight < max_concurrency AND id IN ?", true, w.pool.IDs()).Order("in_flight ASC, id ASC")
		if w.db.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		if err := q.Take(&cred).Error; err != nil {
			return err
		}
		res := tx.Exec("UPDATE upstream_credentials SET in_flight = in_flight + 1, updated_at = ? WHERE id = ? AND in_flight < max_concurrency", now, cred.ID)
		if res.Error != nil || res.RowsAffected == 0 {
			return errors.Join(res.Error, gorm.ErrRecordNotFound)
		}
		res = tx.Exec(`UPDATE tasks SET credential_id = ?, upstream_key = ?, submit_attempts = 1, submitted_at = ?,
			run_deadline = ?, updated_at = ? WHERE id = ? AND status = 'queued' AND credential_id IS NULL`,
			cred.ID, key, now, now.Add(w.cfg.RunTimeout), now, t.ID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return gorm.ErrRecordNotFound // failed by its deadline meanwhile: roll the slot back
		}
		if err := leaveBacklog(tx, t.AccountID); err != nil {
			return err
		}
		return event(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("submission attempt 1 on upstream credential %s, idempotency key %s (worker %s)", cred.ID, key, w.cfg.ID))
	})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return upstream.Credential{}, false, nil
	}
	if err != nil {
		return upstream.Credential{}, false, fmt.Errorf("acquire slot for %s: %w", t.ID, err)
	}
	c, ok := w.pool.Credential(cred.ID)
	t.CredentialID, t.UpstreamKey, t.SubmitAttempts, t.SubmittedAt = &cred.ID, &key, 1, &now
	return c, ok, nil
}

// recordAttempt notes a repeated submission (same credential, same key) before it is made.
func (w *Worker) recordAttempt(ctx context.Context, t *models.Task) error {
	now := w.clock()
	return w.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE tasks SET submit_attempts = submit_attempts + 1, updated_at = ? WHERE id = ? AND status IN ('queued', 'in_progress') AND upstream_task_id IS NULL", now, t.ID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errors.New("task is no longer waiting for submission")
		}
		t.SubmitAttempts++
		return event(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("submission attempt %d on upstream credential %s, same idempotency key %s (worker %s)", t.SubmitAttempts, *t.CredentialID, *t.UpstreamKey, w.cfg.ID))
	})
}

func (w *Worker) submit(ctx context.Context, t *models.Task, cred upstream.Credential) {
	log := w.log.With("task", t.ID, "credential", cred.ID)
	req, err := submitRequest(t)
	if err != nil {
		w.fail(ctx, t, "internal_error", "The task's stored inputs could not be read. Your reservation was released.")
		return
	}
	if w.Inputs != nil && req.Inputs.Count() > 0 {
		signed, err := w.Inputs(ctx, t.ID)
		if err != nil {
			// The database hiccupped; the claim comes round again at the task's next check.
			log.Error("sign the task's media for submission", "err", err)
			return
		}
		// A task created before media were linked to tasks keeps the URLs it was created with.
		if signed.Count() > 0 {
			req.Inputs = signed
		}
	}
	st, err := w.pool.Provider.Submit(ctx, cred, req)
	switch {
	case err == nil:
		now := w.clock()
		// The claim is released here only when there is nothing more to do now. When the answer already
		// says more (in progress, done, failed), apply acts on it under this claim and releases it: let
		// go earlier, and another worker could poll the task at the same time and record its steps twice.
		release := st.State == upstream.StateQueued
		err := w.db.Tx(ctx, func(tx *gorm.DB) error {
			res := tx.Exec(`UPDATE tasks SET upstream_task_id = ?, poll_count = 0, next_check_at = ?,
				lease_owner = CASE WHEN ? THEN NULL ELSE lease_owner END, lease_until = CASE WHEN ? THEN NULL ELSE lease_until END,
				updated_at = ? WHERE id = ? AND status IN ('queued', 'in_progress')`, st.ID, now.Add(w.cfg.PollMin), release, release, now, t.ID)
			if res.Error != nil || res.RowsAffected == 0 {
				return res.Error
			}
			return event(tx, t.ID, now, t.Status, t.Status, "accepted upstream as "+st.ID)
		})
		if err != nil {
			log.Error("record upstream id", "err", err)
			return
		}
		t.UpstreamTaskID = &st.ID
		if st.State != upstream.StateQueued {
			w.apply(ctx, t, cred, st)
		}
	case errors.Is(err, upstream.ErrRejected):
		log.Info("upstream rejected task", "err", err)
		w.fail(ctx, t, "upstream_rejected", "The generation service refused this request: "+rejectReason(err)+". Your reservation was released.")
	default:
		// Timeout, 5xx or a busy credential: the outcome is unknown or deferred. Retry later on the same
		// credential with the same key, so the upstream finds the first submission if it took it.
		log.Warn("submit upstream", "attempt", t.SubmitAttempts, "err", err)
		now := w.clock()
		next := now.Add(backoff(w.cfg.PollMin, w.cfg.PollMax, t.SubmitAttempts, 2))
		_ = w.db.Tx(ctx, func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE tasks SET next_check_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
				next, now, t.ID, w.cfg.ID).Error; err != nil {
				return err
			}
			return event(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("submission attempt %d: no clear answer (%s); will retry with the same key", t.SubmitAttempts, shortErr(err)))
		})
	}
}

// apply acts on an upstream status.
func (w *Worker) apply(ctx context.Context, t *models.Task, cred upstream.Credential, st upstream.Status) {
	switch st.State {
	case upstream.StateCompleted:
		w.complete(ctx, t, cred)
	case upstream.StateFailed:
		msg := "The generation failed upstream"
		if st.ErrorMessage != "" {
			msg += ": " + clip(st.ErrorMessage, 300)
		}
		w.fail(ctx, t, "generation_failed", msg+". Your reservation was released.")
	case upstream.StateInProgress:
		progress := min(max(st.Progress, 0), 99)
		if t.Status == models.StatusQueued {
			now := w.clock()
			err := w.db.Tx(ctx, func(tx *gorm.DB) error {
				res := tx.Exec("UPDATE tasks SET status = 'in_progress', progress = ?, updated_at = ? WHERE id = ? AND status = 'queued'", progress, now, t.ID)
				if res.Error != nil || res.RowsAffected == 0 {
					return res.Error
				}
				return event(tx, t.ID, now, models.StatusQueued, models.StatusInProgress, "generation started upstream")
			})
			if err != nil {
				w.log.Error("mark in progress", "task", t.ID, "err", err)
			}
			t.Status = models.StatusInProgress
			w.changed(t)
		}
		w.reschedule(ctx, t, progress)
	default:
		w.reschedule(ctx, t, t.Progress)
	}
}

// reschedule releases the claim and sets the next poll, further apart with each poll.
func (w *Worker) reschedule(ctx context.Context, t *models.Task, progress int) {
	now := w.clock()
	next := now.Add(backoff(w.cfg.PollMin, w.cfg.PollMax, t.PollCount, 1.5))
	err := w.db.W.WithContext(ctx).Exec(`UPDATE tasks SET next_check_at = ?, poll_count = poll_count + 1, progress = ?,
		lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND status IN ('queued', 'in_progress') AND lease_owner = ?`,
		next, progress, now, t.ID, w.cfg.ID).Error
	if err != nil {
		w.log.Error("reschedule", "task", t.ID, "err", err)
	}
	if progress != t.Progress {
		w.changed(t)
	}
}

// unclaim releases the claim without counting a poll.
func (w *Worker) unclaim(ctx context.Context, t *models.Task, next time.Time) {
	err := w.db.W.WithContext(ctx).Exec("UPDATE tasks SET next_check_at = ?, lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?",
		next, t.ID, w.cfg.ID).Error
	if err != nil {
		w.log.Error("unclaim", "task", t.ID, "err", err)
	}
}

// complete copies the output into the platform's storage and only then, in one transaction, marks the
// task completed, settles its reservation and frees its credential slot. A copy that fails is retried.
func (w *Worker) complete(ctx context.Context, t *models.Task, cred upstream.Credential) {
	log := w.log.With("task", t.ID)
	dctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	idle := time.AfterFunc(downloadIdle, cancel)
	defer idle.Stop()
	body, size, err := w.pool.Provider.Download(dctx, cred, *t.UpstreamTaskID)
	if err != nil {
		log.Warn("download output", "err", err)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	body = idleReader{body, idle}
	// A key of its own per copy: if two instances ever copy the same task, neither deletes the other's.
	key := fmt.Sprintf("outputs/%s/%s.mp4", t.ID, ids.NewToken(12))
	n, err := w.blobs.Put(dctx, key, body)
	_ = body.Close()
	if err == nil && (n == 0 || (size >= 0 && n != size)) {
		err = fmt.Errorf("copied %d of %d bytes", n, size)
	}
	if err != nil {
		log.Warn("copy output", "err", err)
		_ = w.blobs.Delete(ctx, key)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	now := w.clock()
	expires := now.Add(w.cfg.OutputRetention)
	won := false
	err = w.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE tasks SET status = 'completed', progress = 100, completed_at = ?, expires_at = ?, output_key = ?,
			output_bytes = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND status IN ('queued', 'in_progress')`,
			now, expires, key, n, now, t.ID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil
		}
		won = true
		// Lock order everywhere: task, credential, account (acquireSlot takes the credential before a
		// waiting task no one else holds) — so two transactions never wait on each other.
		if err := freeSlot(tx, t.CredentialID, now); err != nil {
			return err
		}
		if _, err := billing.Settle(tx, t); err != nil {
			return err
		}
		return event(tx, t.ID, now, t.Status, models.StatusCompleted, fmt.Sprintf("output copied (%d bytes); %s charged", n, billing.Micros(t.AmountMicros).USD()))
	})
	if err != nil {
		log.Error("complete task", "err", err)
		_ = w.blobs.Delete(ctx, key)
		w.reschedule(ctx, t, t.Progress)
		return
	}
	if !won {
		w.lateCompletion(ctx, t)
		_ = w.blobs.Delete(ctx, key)
		return
	}
	w.changed(t)
}

// lateCompletion notes an upstream completion for a task that had already ended here (its deadline
// passed): the result is ignored, the customer keeps the refund, and the task log says so.
func (w *Worker) lateCompletion(ctx context.Context, t *models.Task) {
	w.log.Warn("upstream completed a task that had already ended; ignored", "task", t.ID)
	now := w.clock()
	var cur models.Task
	if err := w.db.R.WithContext(ctx).Select("status").Where("id = ?", t.ID).Take(&cur).Error; err != nil {
		return
	}
	_ = w.db.W.WithContext(ctx).Create(&models.TaskEvent{TaskID: t.ID, At: now, FromStatus: cur.Status, ToStatus: cur.Status,
		Detail: "upstream reported completion after the task had ended; ignored"}).Error
}

// fail ends the task as failed, releases its reservation and frees its slot, at most once.
func (w *Worker) fail(ctx context.Context, t *models.Task, code, message string) {
	if err := Fail(ctx, w.db, t, code, message, w.clock()); err != nil {
		w.log.Error("fail task", "task", t.ID, "err", err)
	}
	w.changed(t)
}

// Fail ends a task as failed with a refund, guarded so that only the first ending counts.
func Fail(ctx context.Context, d *db.DB, t *models.Task, code, message string, now time.Time) error {
	return d.Tx(ctx, func(tx *gorm.DB) error {
		// Read under a row lock: another instance may be assigning the task a credential right now, and the
		// slot it takes must be freed with the row we fail (SQLite's single writer serialises this anyway).
		q := tx
		if d.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var cur models.Task
		if err := q.Where("id = ?", t.ID).Take(&cur).Error; err != nil {
			return err
		}
		res := tx.Exec(`UPDATE tasks SET status = 'failed', error_code = ?, error_message = ?, lease_owner = NULL, lease_until = NULL,
			updated_at = ? WHERE id = ? AND status = ?`, code, message, now, t.ID, cur.Status)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 || cur.Terminal() {
			return nil
		}
		if err := freeSlot(tx, cur.CredentialID, now); err != nil {
			return err
		}
		if _, err := billing.Release(tx, &cur); err != nil {
			return err
		}
		if cur.Status == models.StatusQueued && cur.CredentialID == nil {
			if err := leaveBacklog(tx, cur.AccountID); err != nil {
				return err
			}
		}
		return event(tx, t.ID, now, cur.Status, models.StatusFailed, code+": "+message)
	})
}

// leaveBacklog uncounts a task that stops waiting for an upstream slot (it got one, or it ended).
func leaveBacklog(tx *gorm.DB, accountID int64) error {
	if err := tx.Exec("UPDATE accounts SET waiting_tasks = waiting_tasks - 1 WHERE id = ? AND waiting_tasks > 0", accountID).Error; err != nil {
		return fmt.Errorf("leave backlog: %w", err)
	}
	return nil
}

// idleReader pushes the idle deadline of a download back with every byte that arrives.
type idleReader struct {
	io.ReadCloser
	idle *time.Timer
}

func (r idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.idle.Reset(downloadIdle)
	}
	return n, err
}

func freeSlot(tx *gorm.DB, credID *string, now time.Time) error {
	if credID == nil {
		return nil
	}
	return tx.Exec("UPDATE upstream_credentials SET in_flight = in_flight - 1, updated_at = ? WHERE id = ? AND in_flight > 0", now, *credID).Error
}

func event(tx *gorm.DB, taskID string, at time.Time, from, to, detail string) error {
	if err := tx.Create(&models.TaskEvent{TaskID: taskID, At: at, FromStatus: from, ToStatus: to, Detail: detail}).Error; err != nil {
		return fmt.Errorf("task event: %w", err)
	}
	return nil
}

// backoff is min·factor^n, capped at max.
func backoff(minD, maxD time.Duration, n int, factor float64) time.Duration {
	d := float64(minD) * math.Pow(factor, float64(min(n, 40)))
	if d > float64(maxD) {
		return maxD
	}
	return time.Duration(d)
}

func shortErr(err error) string { return clip(err.Error(), 200) }

// clip shortens s to at most n bytes on a character boundary, valid UTF-8 (it may end up in PostgreSQL).
func clip(s string, n int) string {
	s, cut := storetext.Clip(s, n)
	if cut {
		s += "…"
	}
	return s
}

func rejectReason(err error) string {
	var re *upstream.RejectedError
	if errors.As(err, &re) && re.Message != "" {
		return clip(re.Message, 300)
	}
	return "request refused"
}
