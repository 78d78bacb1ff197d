// Package margin reads what the platform earned on each model and day: the revenue of settled tasks, what
// they cost upstream, and the difference, to the micro-dollar (`videogen report margin`).
package margin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/money"
)

// MaxDays bounds a report's range, both days included: a year, leap or not. The query reads every
// settled task of the range, so an unbounded one would be a full scan on the live database.
const MaxDays = 366

// ErrRange is returned for a range whose first day is after its last, or that covers more than MaxDays.
var ErrRange = errors.New("invalid report range")

// Figures are the sums over a set of settled tasks.
type Figures struct {
	Tasks   int64
	Revenue money.Micros // what the tasks were charged (their amount_micros)
	Cost    money.Micros // what they cost upstream, counting an unrecorded cost as 0
	// Uncosted is how many of the tasks have no recorded upstream cost (completed before costs were
	// recorded, or by a route without a configured price): while it is not 0, Cost is too low and the
	// margin too high.
	Uncosted int64
}

// Margin is revenue minus cost.
func (f Figures) Margin() money.Micros { return f.Revenue - f.Cost }

// MarginPermille is the margin as a share of revenue in tenths of a percent, rounded half away from
// zero; ok is false when there is no revenue to divide by.
func (f Figures) MarginPermille() (permille int64, ok bool) {
	if f.Revenue == 0 {
		return 0, false
	}
	return roundedRatio(int64(f.Margin()), int64(f.Revenue), 1000), true
}

// MarginPercent is MarginPermille for people: "62.5%", "-45.8%", or "–" when there is no revenue.
func (f Figures) MarginPercent() string {
	p, ok := f.MarginPermille()
	if !ok {
		return "–"
	}
	return PermilleString(p) + "%"
}

// PermilleString writes tenths of a percent as a percentage with one decimal, without the sign: "62.5",
// "-0.3".
func PermilleString(p int64) string {
	sign, u := "", uint64(p)
	if p < 0 {
		sign, u = "-", -u // two's complement: right for math.MinInt64 too
	}
	return fmt.Sprintf("%s%d.%d", sign, u/10, u%10)
}

// roundedRatio is num×scale/den rounded half away from zero. It multiplies in big integers: a year of
// revenue in micro-dollars times 1000 can pass int64's range.
func roundedRatio(num, den, scale int64) int64 {
	n := new(big.Int).Mul(big.NewInt(num), big.NewInt(scale))
	d := big.NewInt(den)
	if d.Sign() < 0 {
		n.Neg(n)
		d.Neg(d)
	}
	q, r := new(big.Int).QuoRem(n, d, new(big.Int)) // truncates toward zero; r has n's sign
	if r.Abs(r).Lsh(r, 1).Cmp(d) >= 0 {
		q.Add(q, big.NewInt(int64(n.Sign())))
	}
	switch {
	case q.IsInt64():
		return q.Int64()
	case q.Sign() > 0: // a cost trillions of times the revenue: no percentage is meaningful anyway
		return math.MaxInt64
	default:
		return math.MinInt64
	}
}

func (f *Figures) add(g Figures) {
	f.Tasks += g.Tasks
	f.Revenue += g.Revenue
	f.Cost += g.Cost
	f.Uncosted += g.Uncosted
}

// Row is one model on one day.
type Row struct {
	Day   time.Time // midnight UTC
	Model string
	Figures
}

// ModelTotal is one model over the whole range.
type ModelTotal struct {
	Model string
	Figures
}

// Result is a report over the UTC days From to To, both included.
type Result struct {
	From, To time.Time    // midnight UTC
	Rows     []Row        // by day, then model; days and models without settled tasks are left out
	Models   []ModelTotal // by model
	Total    Figures      // every task of the range
	// FailedLocally is the tasks we failed here (their run timeout passed) while the provider still had
	// them, last changed within the range: refunded, so no revenue, but the provider may bill them. Cost
	// is what they are expected to cost where the provider could not be made to stop them; Uncosted
	// counts those without a price to tell. Not in Total, which is the settled tasks.
	FailedLocally Figures
}

// Day is the UTC day of t, as midnight UTC.
func Day(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// CheckRange returns the UTC days of from and to, or ErrRange when from's day is after to's or the two
// span more than MaxDays.
func CheckRange(from, to time.Time) (time.Time, time.Time, error) {
	from, to = Day(from), Day(to)
	if from.After(to) {
		return from, to, fmt.Errorf("%w: %s is after %s", ErrRange, from.Format(time.DateOnly), to.Format(time.DateOnly))
	}
	// Whole UTC days, so the hours between two midnights divide evenly.
	if days := int(to.Sub(from).Hours()/24) + 1; days > MaxDays {
		return from, to, fmt.Errorf("%w: %s to %s is %d days, at most %d are read at once", ErrRange,
			from.Format(time.DateOnly), to.Format(time.DateOnly), days, MaxDays)
	}
	return from, to, nil
}

// Report sums the tasks settled on each UTC day from from's to to's, both included, per model. A task
// counts on the day it completed, with what it was charged (billing_state settled: the reservation
// became a charge) and what it cost upstream; released tasks were charged nothing and are left out,
// whatever they cost.
func Report(ctx context.Context, d *db.DB, from, to time.Time) (Result, error) {
	from, to, err := CheckRange(from, to)
	if err != nil {
		return Result{}, err
	}
	res := Result{From: from, To: to}
	day := d.UTCDay("completed_at")
	// The day expression decides which tasks are in; the plain range on completed_at is only there so
	// the tasks_completed index bounds the read. On SQLite that comparison is between texts, each in the
	// offset its time was written with, so it is chronological only to within a day: a day of slack on
	// both sides keeps every task of the range inside it. (billing_state = 'settled' stays a literal, as
	// in internal/staff/ops, for the planner.)
	var rows []struct {
		Day      string
		Model    string
		Tasks    int64
		Revenue  int64
		Cost     int64
		Uncosted int64
	}
	err = d.R.WithContext(ctx).Raw(`SELECT `+day+` AS day, model, COUNT(*) AS tasks,
			CAST(SUM(amount_micros) AS BIGINT) AS revenue,
			CAST(COALESCE(SUM(upstream_cost_micros), 0) AS BIGINT) AS cost,
			SUM(CASE WHEN upstream_cost_micros IS NULL THEN 1 ELSE 0 END) AS uncosted
		FROM tasks
		WHERE billing_state = 'settled' AND completed_at IS NOT NULL
			AND completed_at >= ? AND completed_at < ?
			AND `+day+` BETWEEN ? AND ?
		GROUP BY 1, 2`,
		from.AddDate(0, 0, -1), to.AddDate(0, 0, 2), from.Format(time.DateOnly), to.Format(time.DateOnly)).
		Scan(&rows).Error
	if err != nil {
		return Result{}, fmt.Errorf("sum settled tasks from %s to %s: %w", from.Format(time.DateOnly), to.Format(time.DateOnly), err)
	}
	models := map[string]*ModelTotal{}
	for _, r := range rows {
		t, err := time.Parse(time.DateOnly, r.Day)
		if err != nil {
			return Result{}, fmt.Errorf("read the day %q of a settled task: %w", r.Day, err)
		}
		row := Row{Day: t, Model: r.Model, Figures: Figures{Tasks: r.Tasks, Revenue: money.Micros(r.Revenue),
			Cost: money.Micros(r.Cost), Uncosted: r.Uncosted}}
		res.Rows = append(res.Rows, row)
		m := models[r.Model]
		if m == nil {
			m = &ModelTotal{Model: r.Model}
			models[r.Model] = m
		}
		m.add(row.Figures)
		res.Total.add(row.Figures)
	}
	// Sorted here rather than by ORDER BY: PostgreSQL would order the models by its collation and SQLite
	// by bytes, and the same data must print the same report on both.
	sort.Slice(res.Rows, func(i, j int) bool {
		a, b := res.Rows[i], res.Rows[j]
		return a.Day.Before(b.Day) || a.Day.Equal(b.Day) && a.Model < b.Model
	})
	for _, m := range models {
		res.Models = append(res.Models, *m)
	}
	sort.Slice(res.Models, func(i, j int) bool { return res.Models[i].Model < res.Models[j].Model })
	if res.FailedLocally, err = failedLocally(ctx, d, from, to); err != nil {
		return Result{}, err
	}
	return res, nil
}

// failedLocally sums the tasks failed here while the provider had them (tasks.upstream_cancel set:
// the worker asked the provider to stop them), by the day they last changed.
func failedLocally(ctx context.Context, d *db.DB, from, to time.Time) (Figures, error) {
	day := d.UTCDay("updated_at")
	var f struct {
		Tasks    int64
		Cost     int64
		Uncosted int64
	}
	err := d.R.WithContext(ctx).Raw(`SELECT COUNT(*) AS tasks, CAST(COALESCE(SUM(upstream_cost_micros), 0) AS BIGINT) AS cost,
			COALESCE(SUM(CASE WHEN upstream_cost_micros IS NULL AND upstream_cancel <> 'cancelled' THEN 1 ELSE 0 END), 0) AS uncosted
		FROM tasks
		WHERE upstream_cancel IS NOT NULL AND billing_state = 'released'
			AND updated_at >= ? AND updated_at < ? AND `+day+` BETWEEN ? AND ?`,
		from.AddDate(0, 0, -1), to.AddDate(0, 0, 2), from.Format(time.DateOnly), to.Format(time.DateOnly)).Scan(&f).Error
	if err != nil {
		return Figures{}, fmt.Errorf("sum the tasks failed here while upstream from %s to %s: %w", from.Format(time.DateOnly), to.Format(time.DateOnly), err)
	}
	return Figures{Tasks: f.Tasks, Cost: money.Micros(f.Cost), Uncosted: f.Uncosted}, nil
}
