// Package ledgercheck is the ledger's self-check: it runs tasks.Audit — each account's available and
// reserved balances against the sums of its entries' deltas, each task's entries against its billing
// state (a finished task's reservation resolved exactly once), the counters the task store keeps — and
// records every run as a ledger_checks row, which the staff overview shows and /metrics exports. A
// running server does it on one instance per LEDGER_CHECK_INTERVAL; `videogen ledger check` does it by
// hand.
package ledgercheck

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/infra/runner"
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
	start := now().UTC().Truncate(time.Microsecond)
	began := time.Now()
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
		Detail: strings.Join(lines, "\n"), DurationMs: time.Since(began).Milliseconds(),
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
	Owner string        // this instance's name, recorded with its checks
	Every time.Duration // LEDGER_CHECK_INTERVAL: one check per interval over all instances; 0 = never
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

// Job checks when due: every instance asks at least once a minute, and twice per interval (so a tick
// arriving a hair early misses no turn); the database says whose turn it is (db.ClaimRun), so one
// instance checks per interval however many run. The first check comes a tick after start, not during
// it. ok is false when the check is off (LEDGER_CHECK_INTERVAL=0).
func (c *Checker) Job() (job runner.Every, ok bool) {
	if c.cfg.Every <= 0 {
		return runner.Every{}, false
	}
	return runner.Every{Interval: min(c.cfg.Every/2, time.Minute), Job: func(ctx context.Context) { c.CheckIfDue(ctx) }}, true
}

// CheckIfDue runs the check when no instance has in the last interval, logs what it found — each
// problem as an error — and returns whether it ran.
func (c *Checker) CheckIfDue(ctx context.Context) bool {
	claimed, err := c.DB.ClaimRun(ctx, "ledger_check", c.cfg.Owner, c.cfg.Every, c.Now().UTC())
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Error("claim the ledger check", "err", err)
		}
		return false
	}
	if !claimed {
		return false // another instance checked recently
	}
	res, err := Check(ctx, c.DB, c.cfg.Owner, c.Now)
	if err != nil {
		if ctx.Err() == nil {
			c.Log.Error("ledger check could not run", "err", err)
		}
		return false
	}
	if c.OnResult != nil {
		c.OnResult(res)
	}
	if !res.Drift() {
		c.Log.Info("ledger check: every balance equals its ledger entries", "duration_ms", res.Row.DurationMs)
		return true
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
	return true
}
