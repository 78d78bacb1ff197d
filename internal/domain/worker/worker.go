// Package worker moves tasks through their life: it submits queued tasks upstream on the least-loaded
// credential with room, polls them with growing intervals, copies finished videos into the platform's
// storage, and ends tasks past their deadlines. It decides when; the task store (internal/domain/tasks)
// decides what may happen and writes it, exactly once however many instances run a worker.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"videogen/internal/domain/stills"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/blob"
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
	Parallel        int           // tasks handled at once (WORKER_CONCURRENCY)
}

// Deps are the parts the worker works with.
type Deps struct {
	Tasks *tasks.Store
	Pool  *upstream.Pool
	Blobs blob.Store // where outputs are copied
	// FFmpeg makes the stills of outputs whose provider serves none; without it they have none.
	FFmpeg stills.FFmpeg
	Log    *slog.Logger
	// OnChange, when set, is called after every committed change a client can see (status, progress),
	// so caches of this instance drop the task at once.
	OnChange func(accountID int64, taskID string)
	// Inputs, when set, gives a task's media as freshly signed URLs at submission (media.SignedInputs),
	// so a task that waited in the queue never sends an expired URL; unset, the stored inputs are sent.
	Inputs func(ctx context.Context, taskID string) (models.TaskInputs, error)
}

// Worker is one instance's task runner.
type Worker struct {
	Deps
	cfg  Config
	wake chan struct{}
}

// New returns a worker.
func New(cfg Config, d Deps) *Worker {
	if cfg.Batch <= 0 {
		cfg.Batch = 32
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 64 // WORKER_CONCURRENCY's default
	}
	return &Worker{Deps: d, cfg: cfg, wake: make(chan struct{}, 1)}
}

func (w *Worker) changed(t *models.Task) {
	if w.OnChange != nil {
		w.OnChange(t.AccountID, t.ID)
	}
}

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
	// An idle worker sleeps until the next task it knows of is due, but never longer than idle: what it
	// cannot know of (a task created on another instance, a slot freed there, a breaker closing) waits at
	// most that long. Creates and freed handlers on this instance wake it at once (Notify).
	idle := min(max(5*w.cfg.PollMin, 100*time.Millisecond), 2*time.Second)
	// Creates and freed handlers wake the worker; under a burst of them, claims are spaced so the queue is
	// not re-read for every single one.
	gap := min(max(w.cfg.PollMin/10, 5*time.Millisecond), 50*time.Millisecond)
	t := time.NewTimer(tick)
	defer t.Stop()
	handlers := make(chan struct{}, w.cfg.Parallel)
	for {
		claimed := time.Now()
		wait := tick
		full := false // the round took all it asked for: more work is likely waiting
		if free := cap(handlers) - len(handlers); free > 0 {
			limit := min(free, w.cfg.Batch)
			claims, err := w.Claim(work, limit)
			if err != nil {
				w.Log.Error("claim tasks", "err", err)
			} else if len(claims) == 0 {
				wait = w.idleWait(work, tick, idle)
			}
			full = len(claims) == limit
			for i := range claims {
				handlers <- struct{}{}
				wg.Add(1)
				go func(c Claimed) {
					defer func() {
						<-handlers
						wg.Done()
						w.Notify() // a handler is free: look for more work now
					}()
					w.handle(work, c)
				}(claims[i])
			}
		}
		if full && len(handlers) < cap(handlers) && ctx.Err() == nil {
			// Work is waiting and handlers are free (a round claims at most Batch): claim again at once.
			// Otherwise the next round waits for a free handler, at least gap after this one, so that the
			// handlers freed meanwhile are filled by one round rather than one round each.
			continue
		}
		t.Reset(wait)
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

// idleWait is how long a worker that found nothing to claim sleeps: until the next task is due, at
// least tick (the pace of a busy worker), at most idle.
func (w *Worker) idleWait(ctx context.Context, tick, idle time.Duration) time.Duration {
	next, ok, err := w.Tasks.NextDue(ctx)
	switch {
	case err != nil:
		w.Log.Error("find the next task due", "err", err)
		return tick
	case !ok:
		return idle
	}
	return min(max(next.Sub(w.Tasks.Now()), tick), idle)
}

// handle moves one claimed task a step: a task just given a credential is submitted, a task whose
// submission had no clear answer is submitted again, a submitted task is polled.
func (w *Worker) handle(ctx context.Context, c Claimed) {
	t := &c.Task
	defer w.keepLease(ctx, t)()
	if c.Unreadable {
		w.fail(ctx, t, "internal_error", "The task's stored inputs could not be read. Your reservation was released.")
		return
	}
	if t.CredentialID == nil { // cannot happen: a claimed task holds a credential or is Unreadable
		w.unclaim(ctx, t, w.Tasks.Now().Add(w.cfg.PollMin))
		return
	}
	cred, ok := w.Pool.Credential(*t.CredentialID)
	if !ok {
		// The credential is not configured on this instance (removed from the file before this process
		// started): nobody else may poll this task, so it waits for an operator to configure it again —
		// as draining — or for its run deadline.
		w.Log.Error("task's credential is not configured on this instance", "task", t.ID, "credential", *t.CredentialID)
		w.unclaim(ctx, t, w.Tasks.Now().Add(w.cfg.PollMax))
		return
	}
	if c.Assigned {
		w.submit(ctx, t, cred)
		return
	}
	if t.UpstreamTaskID == nil {
		w.resubmit(ctx, t, cred)
		return
	}
	w.poll(ctx, t, cred)
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
				if err := w.Tasks.RenewLease(ctx, t.ID, w.cfg.ID, w.cfg.Lease); err != nil {
					w.Log.Warn("renew lease", "task", t.ID, "err", err)
				}
			}
		}
	}()
	return func() { close(done) }
}

// unclaim releases the claim without counting a poll.
func (w *Worker) unclaim(ctx context.Context, t *models.Task, next time.Time) {
	if err := w.Tasks.Unclaim(ctx, t.ID, w.cfg.ID, next); err != nil {
		w.Log.Error("unclaim", "task", t.ID, "err", err)
	}
}

// note adds a line to the task's log; a failure to write it is only logged.
func (w *Worker) note(ctx context.Context, t *models.Task, detail string) {
	if err := w.Tasks.Note(ctx, t, detail); err != nil {
		w.Log.Error("task log", "task", t.ID, "err", err)
	}
}

// fail ends the task as failed with a refund (at most once) and tells the caches.
func (w *Worker) fail(ctx context.Context, t *models.Task, code, message string) {
	if err := w.Tasks.Fail(ctx, t, code, message); err != nil {
		w.Log.Error("fail task", "task", t.ID, "err", err)
	}
	w.changed(t)
}
