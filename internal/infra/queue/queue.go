// Package queue is the engine of the service's queued work — e-mail, webhook deliveries, Stripe events,
// receipts, password resets and the periodic chores: River (github.com/riverqueue/river) on the
// service's own database, PostgreSQL or the embedded SQLite file (docs/jobs.md). A job is inserted in the
// transaction of the change that causes it (InsertTx), so neither is ever committed without the other;
// River leases it, retries it on the kind's own schedule, keeps it while it is retried and prunes it
// after; periodic jobs run on one elected instance.
//
// The task lifecycle is not here: its claims carry the money and the upstream slots (docs/decisions.md,
// "Queued work on River").
package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/infra/db"
)

// The queues, each with its own workers, so that one kind's backlog never holds up another's.
const (
	Mail     = "mail"     // e-mail to Resend (or the log)
	Webhooks = "webhooks" // deliveries to customers' endpoints
	Payments = "payments" // Stripe events, receipts, automatic top-ups
	Chores   = "chores"   // the periodic chores: retention, sweeps, checks
)

// Config tunes the queues.
type Config struct {
	// ID names this instance among River's clients (WORKER_ID).
	ID string
	// Poll is how often each queue looks for due jobs (JOBS_POLL_INTERVAL, 1 s): the database has no
	// notifications through database/sql, so a new job waits at most this long.
	Poll time.Duration
	// Lease is how long a job may run (LEASE_DURATION, 1 min): each kind bounds its calls well inside it,
	// and a job still marked running after twice it — its instance died — is worked again.
	Lease time.Duration
	// Workers is the jobs each queue works at once on this instance; a queue missing here gets 4.
	Workers map[string]int
	// Now is the clock: River schedules and stamps jobs by it, so a test that moves time moves the
	// queues' too. Required.
	Now func() time.Time
	Log *slog.Logger
}

// Queue is River on the service's database.
type Queue struct {
	db      *db.DB
	client  *river.Client[*sql.Tx]
	workers *river.Workers
	cfg     Config
	kinds   int // workers added
	started bool
}

// New returns the queues of d, ready to take workers (Add) and periodic jobs (Every) before Start.
// Jobs may be inserted as soon as their kind's worker is added, by any instance: one that never starts
// (a command) leaves them to the instances that work.
func New(d *db.DB, cfg Config) (*Queue, error) {
	if cfg.Now == nil {
		return nil, errors.New("queue: no clock (Config.Now)")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	q := &Queue{db: d, workers: river.NewWorkers(), cfg: cfg}
	queues := map[string]river.QueueConfig{}
	for _, name := range []string{Mail, Webhooks, Payments, Chores} {
		n := cfg.Workers[name]
		if n <= 0 {
			n = 4
		}
		queues[name] = river.QueueConfig{MaxWorkers: n}
	}
	rc := &river.Config{
		ID:                cfg.ID,
		Queues:            queues,
		Workers:           q.workers,
		FetchPollInterval: cfg.Poll,
		// A queue that works through a backlog fetches again as soon as a worker is free, at most every
		// 5 ms: River's 100 ms default held four mail workers to 40 e-mails a second (docs/performance.md,
		// "Queued work before and after River").
		FetchCooldown: min(cfg.Poll, 5*time.Millisecond),
		// A job's own kind decides its attempts (its InsertOpts) and waits (its worker's NextRetry); this
		// is only the bound for a kind that says nothing.
		MaxAttempts: 25,
		// Finished jobs are kept a week for the staff's queue view; the records support reads (mail sent,
		// deliveries, events) are the domain's own tables, kept on their own schedules.
		CompletedJobRetentionPeriod: 7 * 24 * time.Hour,
		DiscardedJobRetentionPeriod: 30 * 24 * time.Hour,
		CancelledJobRetentionPeriod: 7 * 24 * time.Hour,
		// A job that outlives the lease is cancelled through its context; each kind bounds its own calls
		// well inside it (an e-mail 20 s, a webhook 10 s). One still running after two leases was left
		// by an instance that died, and is worked again (at least once; each kind makes a repeat harmless).
		JobTimeout:           cfg.Lease,
		RescueStuckJobsAfter: 2 * cfg.Lease,
		Logger:               cfg.Log.With("part", "queue"),
		PollOnly:             true,
		Test:                 river.TestConfig{Time: clock{cfg.Now}},
	}
	var err error
	if d.Postgres {
		q.client, err = river.NewClient(riverdatabasesql.New(d.WSQL()), rc)
	} else {
		q.client, err = river.NewClient(riversqlite.New(d.WSQL()), rc)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	return q, nil
}

// clock is River's view of the service's clock.
type clock struct{ now func() time.Time }

// Now is in microseconds, PostgreSQL's precision: a job stamped with a time the database rounds up
// would never come due on a clock that stands still (a test's).
func (c clock) Now() time.Time { return c.now().Truncate(time.Microsecond) }

// NowOrNil is always the service's clock's time, so River's SQL compares with the same clock the
// service stamps its rows by (a test's moved clock included), never the database's now().
func (c clock) NowOrNil() *time.Time {
	t := c.Now()
	return &t
}

// Add registers the worker of one job kind. Call it before Start, and before the first insert of the kind.
func Add[T river.JobArgs](q *Queue, w river.Worker[T]) {
	river.AddWorker(q.workers, w)
	q.kinds++
}

// Every runs the job args returns every interval on one instance of the cluster (River's elected leader),
// and once when the leader starts.
func (q *Queue) Every(interval time.Duration, args func() river.JobArgs) {
	q.client.PeriodicJobs().Add(river.NewPeriodicJob(skipMissed{every: interval, now: q.cfg.Now},
		func() (river.JobArgs, *river.InsertOpts) { return args(), nil },
		&river.PeriodicJobOpts{RunOnStart: true}))
}

// skipMissed is River's fixed interval, except that runs the clock has already passed are not made up
// one by one: River inserts a job for each, so a clock moved an hour ahead (a test's) or a leader woken
// from a long pause would insert a job per missed interval. One job runs, the next an interval later.
type skipMissed struct {
	every time.Duration
	now   func() time.Time
}

func (s skipMissed) Next(t time.Time) time.Time {
	if next := t.Add(s.every); next.After(s.now()) {
		return next
	}
	return s.now().Add(s.every)
}

// InsertTx inserts a job in tx, the GORM transaction of the change that causes it: it is worked once tx
// commits, and never if tx rolls back.
func (q *Queue) InsertTx(tx *gorm.DB, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	stx, err := sqlTx(tx)
	if err != nil {
		return nil, err
	}
	res, err := q.client.InsertTx(tx.Statement.Context, stx, args, opts)
	if err != nil {
		return nil, fmt.Errorf("queue %s job: %w", args.Kind(), err)
	}
	return res, nil
}

// InsertManyTx is InsertTx for several jobs.
func (q *Queue) InsertManyTx(tx *gorm.DB, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	stx, err := sqlTx(tx)
	if err != nil {
		return err
	}
	if _, err := q.client.InsertManyTx(tx.Statement.Context, stx, params); err != nil {
		return fmt.Errorf("queue %d %s jobs: %w", len(params), params[0].Args.Kind(), err)
	}
	return nil
}

// RetryNowTx makes a job waiting for its retry (or its scheduled time) available at once, inside tx.
func (q *Queue) RetryNowTx(tx *gorm.DB, id int64) error {
	stx, err := sqlTx(tx)
	if err != nil {
		return err
	}
	if _, err := q.client.JobRetryTx(tx.Statement.Context, stx, id); err != nil {
		return fmt.Errorf("retry job %d now: %w", id, err)
	}
	return nil
}

// Insert inserts a job in a transaction of its own.
func (q *Queue) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	return q.db.Tx(ctx, func(tx *gorm.DB) error {
		_, err := q.InsertTx(tx, args, opts)
		return err
	})
}

// CompleteTx marks the running job completed inside tx, the transaction that records its outcome, so a
// crash after the commit never works it again (and a crash before leaves both undone).
func CompleteTx[T river.JobArgs](tx *gorm.DB, job *river.Job[T]) error {
	stx, err := sqlTx(tx)
	if err != nil {
		return err
	}
	ctx := tx.Statement.Context
	if _, err := river.ClientFromContextSafely[*sql.Tx](ctx); err != nil {
		return fmt.Errorf("complete %s job %d: not inside a worker", job.Kind, job.ID)
	}
	// The driver's type picks the SQL; both take a *sql.Tx.
	if isSQLite(tx) {
		_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, stx, job)
	} else {
		_, err = river.JobCompleteTx[*riverdatabasesql.Driver](ctx, stx, job)
	}
	if err != nil {
		return fmt.Errorf("complete %s job %d: %w", job.Kind, job.ID, err)
	}
	return nil
}

func isSQLite(tx *gorm.DB) bool { return tx.Dialector.Name() == "sqlite" }

// sqlTx is the database/sql transaction under a GORM one.
func sqlTx(tx *gorm.DB) (*sql.Tx, error) {
	stx, ok := tx.Statement.ConnPool.(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("queue: a job is inserted inside a transaction (db.Tx), not on %T", tx.Statement.ConnPool)
	}
	return stx, nil
}

// Start starts working the jobs of every queue.
func (q *Queue) Start(ctx context.Context) error {
	if q.kinds == 0 {
		return nil // nothing to work (River refuses to start so)
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("start the queues: %w", err)
	}
	q.started = true
	return nil
}

// softStop is how long a stop waits for the jobs in hand before cancelling them: an e-mail's call or a
// webhook's attempt ends well inside it (and finishes even when cancelled); a long chore is cut and
// runs again at its next interval.
const softStop = 15 * time.Second

// Run works the queues until ctx ends, then stops: jobs in hand are finished, for softStop at most; those
// not started stay for the next start or another instance. It is a runner part.
func (q *Queue) Run(ctx context.Context) error {
	if err := q.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), softStop)
	defer cancel()
	return q.Stop(sctx)
}

// Stop stops fetching and waits for the jobs in hand until ctx ends, then cancels them and waits for
// them to return.
func (q *Queue) Stop(ctx context.Context) error {
	if !q.started {
		return nil
	}
	if err := q.client.Stop(ctx); err != nil {
		if err := q.client.StopAndCancel(context.Background()); err != nil {
			return fmt.Errorf("stop the queues: %w", err)
		}
	}
	return nil
}

// Client is River's client, for what this package does not wrap (tests' subscriptions, the staff's view).
func (q *Queue) Client() *river.Client[*sql.Tx] { return q.client }

// riverTimeLayout is how River's SQLite driver writes times (UTC).
const riverTimeLayout = "2006-01-02 15:04:05.000"

// TimeOf reads a time of River's tables as the database drivers hand it over: a time (PostgreSQL, and
// SQLite's driver for a column it recognises as a timestamp) or River's text on SQLite; nil is no time.
func TimeOf(v any) (time.Time, error) {
	var s string
	switch t := v.(type) {
	case time.Time:
		return t.UTC(), nil
	case nil:
		return time.Time{}, nil
	case string:
		s = t
	case []byte:
		s = string(t)
	default:
		return time.Time{}, fmt.Errorf("%T is not a time", v)
	}
	for _, layout := range []string{riverTimeLayout, time.RFC3339Nano, "2006-01-02 15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time", s)
}
