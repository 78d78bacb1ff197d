// Package usage reports what an account made and spent: videos, seconds and spend per day, model or key
// over a range of days (from its tasks), and monthly statements (from its ledger), both counted in the
// account's time zone (docs/usage.md).
package usage

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/models"
)

// Ways a report groups its rows.
const (
	ByDay   = "day"
	ByModel = "model"
	ByKey   = "key"
)

// MaxDays is the longest range one report covers: a year, leap day included.
const MaxDays = 366

// DefaultDays is the range a report covers when none is chosen: the last 30 days, today included.
const DefaultDays = 30

const dateForm = time.DateOnly

// Query is a report's range and grouping as typed (GET form fields); Parse checks it.
type Query struct {
	From, To string // YYYY-MM-DD, days in the account's zone, both included; "" = the default range
	Group    string // day, model or key; "" = day
}

// Range is a checked query: whole days in the account's zone.
type Range struct {
	From, To time.Time // midnight starting the first and the last day, in Loc
	Group    string
	Loc      *time.Location
}

// Start is the first instant of the range.
func (r Range) Start() time.Time { return r.From }

// End is the first instant after the range: midnight after its last day.
func (r Range) End() time.Time { return r.To.AddDate(0, 0, 1) }

// Days is how many days the range covers.
func (r Range) Days() int {
	n := 0
	for d := r.From; !d.After(r.To); d = d.AddDate(0, 0, 1) {
		n++
	}
	return n
}

// Values are the form fields that reproduce the range (for links and the CSV export).
func (r Range) Values() (from, to, group string) {
	return r.From.Format(dateForm), r.To.Format(dateForm), r.Group
}

// Parse checks a query in the account's zone at now. Empty dates take the default range, the last
// DefaultDays days ending today. The problems are keyed by field (from, to, group) and say what to do.
func (q Query) Parse(loc *time.Location, now time.Time) (Range, map[string]string) {
	errs := map[string]string{}
	now = now.In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	r := Range{Loc: loc, Group: strings.TrimSpace(q.Group), To: today, From: today.AddDate(0, 0, -(DefaultDays - 1))}
	read := func(field, text string, into *time.Time) {
		text = strings.TrimSpace(text)
		if text == "" {
			return
		}
		d, err := time.ParseInLocation(dateForm, text, loc)
		if err != nil || d.Year() < 2000 || d.Year() > 2999 {
			errs[field] = fmt.Sprintf("%q is not a date: use YYYY-MM-DD, such as %s.", clip(text), today.Format(dateForm))
			return
		}
		*into = d
	}
	read("from", q.From, &r.From)
	read("to", q.To, &r.To)
	// Only one bound given: the range runs the default length from or to it.
	if strings.TrimSpace(q.From) == "" && strings.TrimSpace(q.To) != "" && errs["to"] == "" {
		r.From = r.To.AddDate(0, 0, -(DefaultDays - 1))
	}
	if errs["from"] == "" && errs["to"] == "" {
		switch {
		case r.To.Before(r.From):
			errs["to"] = "The last day must be on or after the first day."
		case r.To.After(r.From.AddDate(0, 0, MaxDays-1)):
			errs["to"] = fmt.Sprintf("A report covers at most %d days; choose a shorter range, or export each part.", MaxDays)
		}
	}
	switch r.Group {
	case "":
		r.Group = ByDay
	case ByDay, ByModel, ByKey:
	default:
		errs["group"] = "Group by day, model or key."
	}
	if len(errs) > 0 {
		return r, errs
	}
	return r, nil
}

func clip(s string) string {
	if r := []rune(s); len(r) > 20 {
		return string(r[:20]) + "…"
	}
	return s
}

// Figures are what a report counts for one row, or for the whole range.
type Figures struct {
	Videos    int64 // tasks created
	Completed int64
	Failed    int64 // failed, not cancelled: nothing charged, the reservation returned
	Cancelled int64 // cancelled by the customer: nothing charged, the reservation returned
	// Seconds and SpentMicros are of the charged (settled) videos: what was delivered and paid for.
	Seconds     int64
	SpentMicros int64
	// ReservedMicros is held for videos still running: charged when they complete, returned if not.
	ReservedMicros int64
}

// Running is how many of the videos are still queued or in progress.
func (f Figures) Running() int64 { return f.Videos - f.Completed - f.Failed - f.Cancelled }

func (f *Figures) add(o Figures) {
	f.Videos += o.Videos
	f.Completed += o.Completed
	f.Failed += o.Failed
	f.Cancelled += o.Cancelled
	f.Seconds += o.Seconds
	f.SpentMicros += o.SpentMicros
	f.ReservedMicros += o.ReservedMicros
}

// Row is one line of a report: a day, a model or a key.
type Row struct {
	Day   time.Time // ByDay: midnight in the account's zone
	Model string    // ByModel
	// ByKey: the key's id (0 for tasks made without one), name and display prefix, and whether it is revoked.
	KeyID      int64
	KeyName    string
	KeyPrefix  string
	KeyRevoked bool
	Figures
}

// Label names the row for people.
func (r Row) Label(group string) string {
	switch group {
	case ByDay:
		return r.Day.Format("Mon Jan 2, 2006")
	case ByModel:
		return r.Model
	}
	switch {
	case r.KeyID == 0:
		return "No key"
	case r.KeyName == "":
		return "Unnamed key"
	}
	return r.KeyName
}

// Report is an account's usage over a range, one row per day (every day of the range, oldest first), per
// model or per key (most spent first).
type Report struct {
	Range
	Rows  []Row
	Total Figures
}

// Empty reports whether no video was created in the range.
func (r *Report) Empty() bool { return r.Total.Videos == 0 }

// figureColumns sums a task's figures in SQL. Seconds and spend count charged videos only: a task's
// amount is what its settlement moved (the ledger audit holds the two equal).
var figureColumns = `COUNT(*) AS videos,
	` + sum("CASE WHEN status = '"+tasks.Completed+"' THEN 1 ELSE 0 END") + ` AS completed,
	` + sum("CASE WHEN status = '"+tasks.Failed+"' AND "+notCancelled+" THEN 1 ELSE 0 END") + ` AS failed,
	` + sum("CASE WHEN status = '"+tasks.Failed+"' AND NOT "+notCancelled+" THEN 1 ELSE 0 END") + ` AS cancelled,
	` + sum("CASE WHEN billing_state = 'settled' THEN seconds ELSE 0 END") + ` AS seconds,
	` + sum("CASE WHEN billing_state = 'settled' THEN amount_micros ELSE 0 END") + ` AS spent_micros,
	` + sum("CASE WHEN billing_state = 'reserved' THEN amount_micros ELSE 0 END") + ` AS reserved_micros`

// notCancelled is true of a task its customer did not cancel (a cancel ends a task failed with this code).
var notCancelled = "(error_code IS NULL OR error_code <> '" + tasks.CodeCancelled + "')"

// sum is SUM in SQL as an exact BIGINT on both engines (PostgreSQL sums a BIGINT as NUMERIC), 0 over no rows.
func sum(expr string) string { return "CAST(COALESCE(SUM(" + expr + "), 0) AS BIGINT)" }

// bucketSeconds is the width of the slices tasks are counted in before they are given to their day in
// the account's zone: every zone's offset from UTC is a multiple of 15 minutes, so a slice never
// straddles a local midnight. SQL groups by slice (neither engine knows the zone), Go by day.
const bucketSeconds = 900

func bucketOf(d *db.DB, column string) string {
	if d.Postgres {
		return fmt.Sprintf("CAST(FLOOR(EXTRACT(EPOCH FROM %s) / %d) AS BIGINT)", column, bucketSeconds)
	}
	return fmt.Sprintf("(CAST(strftime('%%s', %s) AS INTEGER) / %d)", column, bucketSeconds)
}

// Build reads an account's usage over r from its tasks: those created in the range (by the
// tasks_account_created index), whatever became of them since.
func Build(ctx context.Context, d *db.DB, accountID int64, r Range) (*Report, error) {
	rep := &Report{Range: r}
	scope := d.R.WithContext(ctx).Table("tasks").Where("account_id = ? AND created_at >= ? AND created_at < ?", accountID, r.Start().UTC(), r.End().UTC())
	switch r.Group {
	case ByDay:
		var rows []struct {
			Bucket int64
			Figures
		}
		if err := scope.Select(bucketOf(d, "created_at") + " AS bucket, " + figureColumns).Group("bucket").Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("usage of account %d per day: %w", accountID, err)
		}
		index := map[string]int{}
		for day := r.From; !day.After(r.To); day = day.AddDate(0, 0, 1) {
			index[day.Format(dateForm)] = len(rep.Rows)
			rep.Rows = append(rep.Rows, Row{Day: day})
		}
		for _, b := range rows {
			i, ok := index[time.Unix(b.Bucket*bucketSeconds, 0).In(r.Loc).Format(dateForm)]
			if !ok {
				return nil, fmt.Errorf("usage of account %d: slice %d falls outside %s–%s", accountID, b.Bucket, r.From, r.To)
			}
			rep.Rows[i].add(b.Figures)
		}
	case ByModel:
		if err := scope.Select("model, " + figureColumns).Group("model").Scan(&rep.Rows).Error; err != nil {
			return nil, fmt.Errorf("usage of account %d per model: %w", accountID, err)
		}
	case ByKey:
		var rows []struct {
			APIKeyID *int64 `gorm:"column:api_key_id"`
			Figures
		}
		if err := scope.Select("api_key_id, " + figureColumns).Group("api_key_id").Scan(&rows).Error; err != nil {
			return nil, fmt.Errorf("usage of account %d per key: %w", accountID, err)
		}
		keys, err := models.AccountKeys(ctx, d.R, accountID)
		if err != nil {
			return nil, err
		}
		byID := map[int64]models.APIKey{}
		for _, k := range keys {
			byID[k.ID] = k
		}
		for _, kr := range rows {
			row := Row{Figures: kr.Figures}
			if kr.APIKeyID != nil {
				k := byID[*kr.APIKeyID]
				row.KeyID, row.KeyName, row.KeyPrefix, row.KeyRevoked = *kr.APIKeyID, k.Name, k.Prefix, k.RevokedAt != nil
			}
			rep.Rows = append(rep.Rows, row)
		}
	default:
		return nil, fmt.Errorf("usage: no grouping %q", r.Group)
	}
	if r.Group != ByDay {
		sort.SliceStable(rep.Rows, func(i, j int) bool {
			a, b := rep.Rows[i], rep.Rows[j]
			if a.SpentMicros != b.SpentMicros {
				return a.SpentMicros > b.SpentMicros
			}
			if a.Videos != b.Videos {
				return a.Videos > b.Videos
			}
			return a.Label(r.Group) < b.Label(r.Group)
		})
	}
	for _, row := range rep.Rows {
		rep.Total.add(row.Figures)
	}
	return rep, nil
}
