// Package ledgercheck is the ledger's self-check: it runs tasks.Audit — each account's available and
// reserved balances against the sums of its entries' deltas, each task's entries against its billing
// state (a finished task's reservation resolved exactly once), the counters the task store keeps — and
// records every run as a ledger_checks row, which the staff overview shows and /metrics exports. A
// running server does it as a periodic job of the chores queue every LEDGER_CHECK_INTERVAL (docs/jobs.md,
// "Periodic chores"); `videogen ledger check` does it by hand.
package ledgercheck

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
	"videogen/models"
)

// Result is one run of the check, as recorded.
type Result struct {
	Row      models.LedgerCheck
	Problems []tasks.Problem
	// Accounts are the accounts the problems concern (a task's problem concerns its account), in order.
	Accounts []int64
}

// Drift reports whether the check found anything wrong.
func (r Result) Drift() bool { return len(r.Problems) > 0 }

// maxDetail bounds the detail column: the first problems say enough, and `videogen audit` lists all.
const maxDetail = 100

// Check runs the check once at now() on one consistent snapshot, records the result (owner says who ran
// it) and returns it. A check that could not run records nothing: no row means no answer.
func Check(ctx context.Context, d *db.DB, owner string, now func() time.Time) (Result, error) {
	began := now()
	start := began.UTC().Truncate(time.Microsecond)
	problems, err := tasks.Audit(ctx, d)
	if err != nil {
		return Result{}, fmt.Errorf("ledger check: %w", err)
	}
	accounts, err := accountsOf(ctx, d, problems)
	if err != nil {
		return Result{}, err
	}
	ids := make([]string, len(accounts))
	for i, a := range accounts {
		ids[i] = strconv.FormatInt(a, 10)
	}
	lines := make([]string, 0, min(len(problems), maxDetail)+1)
	for i, p := range problems {
		if i == maxDetail {
			lines = append(lines, fmt.Sprintf("… and %d more (videogen audit lists them all)", len(problems)-maxDetail))
			break
		}
		lines = append(lines, p.String())
	}
	res := Result{Problems: problems, Accounts: accounts, Row: models.LedgerCheck{
		At: start, Owner: owner, Problems: len(problems), Accounts: strings.Join(ids, ","),
		Detail: strings.Join(lines, "\n"), DurationMs: now().Sub(began).Milliseconds(),
	}}
	if err := d.W.WithContext(ctx).Create(&res.Row).Error; err != nil {
		return res, fmt.Errorf("record the ledger check: %w", err)
	}
	return res, nil
}

// accountsOf returns the accounts the problems concern, sorted: an account's own problems, and the
// account of each task a problem names. A credential's counter concerns no account.
func accountsOf(ctx context.Context, d *db.DB, problems []tasks.Problem) ([]int64, error) {
	seen := map[int64]bool{}
	var taskIDs []string
	for _, p := range problems {
		if p.AccountID != 0 {
			seen[p.AccountID] = true
		}
		if p.TaskID != "" {
			taskIDs = append(taskIDs, p.TaskID)
		}
	}
	for chunk := range slices.Chunk(taskIDs, 500) {
		var owners []int64
		if err := d.R.WithContext(ctx).Model(&models.Task{}).Where("id IN ?", chunk).Distinct().Pluck("account_id", &owners).Error; err != nil {
			return nil, fmt.Errorf("find the accounts of drifted tasks: %w", err)
		}
		for _, a := range owners {
			seen[a] = true
		}
	}
	out := make([]int64, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	slices.Sort(out)
	return out, nil
}

// Config tunes the background check.
type Config struct {
	Owner string        // this instance's name, recorded with the checks it works
	Every time.Duration // LEDGER_CHECK_INTERVAL: one check per interval, on the leader's schedule; 0 = never
}

// Deps are what the background check reads and tells.
type Deps struct {
	DB  *db.DB
	Log *slog.Logger
	Now func() time.Time // the clock
	// OnResult hears of each check this instance ran (the metrics count drift); nil: nobody.
	OnResult func(Result)
}

// Checker runs the check in the background.
type Checker struct {
	Deps
	cfg Config
}

// New returns a background checker.
func New(cfg Config, d Deps) *Checker {
	return &Checker{Deps: d, cfg: cfg}
}

// Args is the job of one background check.
type Args struct{}

// Kind implements river.JobArgs.
func (Args) Kind() string { return "ledger_check" }

// InsertOpts: a check is not retried; the next interval's is (docs/jobs.md). A check that could not run
// records nothing, so the staff overview and /metrics show the last one that did.
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Chores, MaxAttempts: 1}
}

// Schedule registers the check's worker with q and, unless the check is off (LEDGER_CHECK_INTERVAL=0),
// runs it on the leader every interval and when a leader starts. The worker is there either way, so a
// check another instance's schedule inserts is worked here too.
func (c *Checker) Schedule(q *queue.Queue) {
	queue.Add(q, &worker{c: c})
	if c.cfg.Every > 0 {
		q.Every(c.cfg.Every, func() river.JobArgs { return Args{} })
	}
}

type worker struct {
	river.WorkerDefaults[Args]
	c *Checker
}

// Timeout: a check reads one snapshot of the whole ledger, which takes seconds on a large database; it
// may take until the next is due (and at least ten minutes).
func (w *worker) Timeout(*river.Job[Args]) time.Duration { return max(w.c.cfg.Every, 10*time.Minute) }

func (w *worker) Work(ctx context.Context, _ *river.Job[Args]) error { return w.c.Run(ctx) }

// Run runs the check, tells OnResult, and logs what it found — each problem as an error. Drift is no
// error of Run's: the check ran and recorded it.
func (c *Checker) Run(ctx context.Context) error {
	res, err := Check(ctx, c.DB, c.cfg.Owner, c.Now)
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Error("ledger check could not run", "err", err)
		}
		return err
	}
	if c.OnResult != nil {
		c.OnResult(res)
	}
	if !res.Drift() {
		c.Log.Info("ledger check: every balance equals its ledger entries", "duration_ms", res.Row.DurationMs)
		return nil
	}
	for _, p := range res.Problems {
		attrs := []any{"problem", p.What}
		switch {
		case p.TaskID != "":
			attrs = append(attrs, "task", p.TaskID)
		case p.CredentialID != "":
			attrs = append(attrs, "credential", p.CredentialID)
		default:
			attrs = append(attrs, "account", p.AccountID)
		}
		c.Log.Error("ledger drift", attrs...)
	}
	c.Log.Error("ledger check found drift", "problems", len(res.Problems), "accounts", res.Row.Accounts, "check", res.Row.ID)
	return nil
}
