package customer

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/usage"
	"videogen/models"
	"videogen/views"
)

// UsagePage is the Usage page: a range's videos, seconds and spend per day, model or key, as charts and a
// table, with the CSV export of the same query and the links to the monthly statements.
type UsagePage struct {
	Query  usage.Query       // as typed, shown again in the form
	Errors map[string]string // why the query was refused (the page answers 422 and shows no report)
	Report *usage.Report
	Zone   string      // the account's zone, which the days are counted in
	Months []time.Time // the months with statements, newest first
}

// link is the page (or its CSV export, at path) for the report's range grouped by group.
func (p UsagePage) link(path, group string) string {
	from, to, _ := p.Report.Values()
	return path + "?" + url.Values{"from": {from}, "to": {to}, "group": {group}}.Encode()
}

// GroupLink is this range grouped another way.
func (p UsagePage) GroupLink(group string) string { return p.link("/console/usage", group) }

// CSV is the export of exactly what the page shows.
func (p UsagePage) CSV() string { return p.link("/console/usage.csv", p.Report.Group) }

// FromValue and ToValue fill the range form: what was typed, else the range shown.
func (p UsagePage) FromValue() string {
	if p.Query.From != "" || p.Report == nil {
		return p.Query.From
	}
	from, _, _ := p.Report.Values()
	return from
}

// ToValue fills the form's last day.
func (p UsagePage) ToValue() string {
	if p.Query.To != "" || p.Report == nil {
		return p.Query.To
	}
	_, to, _ := p.Report.Values()
	return to
}

// GroupValue is the grouping the form shows selected.
func (p UsagePage) GroupValue() string {
	if p.Report != nil {
		return p.Report.Group
	}
	return p.Query.Group
}

// RangeLabel says which days the report covers: "Mar 1 – Mar 30, 2026 (30 days)".
func (p UsagePage) RangeLabel() string {
	r := p.Report
	n := r.Days()
	unit := "days"
	if n == 1 {
		unit = "day"
	}
	if r.From.Year() == r.To.Year() {
		return fmt.Sprintf("%s – %s (%d %s)", r.From.Format("Jan 2"), r.To.Format("Jan 2, 2006"), n, unit)
	}
	return fmt.Sprintf("%s – %s (%d %s)", r.From.Format("Jan 2, 2006"), r.To.Format("Jan 2, 2006"), n, unit)
}

// DayBars are the day chart of one figure: "videos", "seconds" or "spend".
func (p UsagePage) DayBars(figure string) []views.Bar {
	rows := p.Report.Rows
	values, labels := make([]int64, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		day := r.Day.Format("Mon Jan 2")
		switch figure {
		case "videos":
			values[i] = r.Videos
			labels[i] = fmt.Sprintf("%s: %d %s (%d completed, %d failed, %d cancelled, %d running)", day, r.Videos, plural(r.Videos, "video", "videos"), r.Completed, r.Failed, r.Cancelled, r.Running())
		case "seconds":
			values[i] = r.Seconds
			labels[i] = fmt.Sprintf("%s: %d %s of video charged", day, r.Seconds, plural(r.Seconds, "second", "seconds"))
		default:
			values[i] = r.SpentMicros
			labels[i] = fmt.Sprintf("%s: %s charged", day, views.Money(r.SpentMicros))
		}
	}
	return views.BarsOf(values, labels)
}

// DayMost is the largest day's figure, written for the chart's top label.
func (p UsagePage) DayMost(figure string) string {
	var most int64
	for _, r := range p.Report.Rows {
		switch figure {
		case "videos":
			most = max(most, r.Videos)
		case "seconds":
			most = max(most, r.Seconds)
		default:
			most = max(most, r.SpentMicros)
		}
	}
	if figure == "spend" {
		return views.Money(most)
	}
	return views.Int64(most)
}

// FirstDay and LastDay label the day charts' ends.
func (p UsagePage) FirstDay() string { return p.Report.From.Format("Jan 2") }

// LastDay labels the day charts' right end.
func (p UsagePage) LastDay() string { return p.Report.To.Format("Jan 2") }

// RowBars are the model or key chart of one figure ("videos", "seconds" or "spend"): a bar per row of the
// table, in its order, with the view box's height.
func (p UsagePage) RowBars(figure string) ([]views.HBar, float64) {
	rows := p.Report.Rows
	values, names, figures := make([]int64, len(rows)), make([]string, len(rows)), make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Label(p.Report.Group)
		if p.Report.Group == usage.ByKey && r.KeyPrefix != "" {
			names[i] += " (" + r.KeyPrefix + "…)"
		}
		switch figure {
		case "videos":
			values[i], figures[i] = r.Videos, views.Int64(r.Videos)
		case "seconds":
			values[i], figures[i] = r.Seconds, views.Int64(r.Seconds)+" s"
		default:
			values[i], figures[i] = r.SpentMicros, views.Money(r.SpentMicros)
		}
	}
	return views.HBarsOf(values, names, figures)
}

// RowChartTitle and RowChartDesc name a model or key chart for people who cannot see it: "Videos per
// model", then what its bars show and the range's total.
func (p UsagePage) RowChartTitle(figure string) string {
	what := map[string]string{"videos": "Videos", "seconds": "Seconds charged", "spend": "Spend"}[figure]
	return what + " per " + p.chartPer()
}

// chartPer names a row of the model and key charts in a sentence: "model", "API key".
func (p UsagePage) chartPer() string {
	if p.Report.Group == usage.ByKey {
		return "API key"
	}
	return strings.ToLower(p.GroupHeading())
}

// RowChartDesc says what a model or key chart's bars show, in the table's order, and the total.
func (p UsagePage) RowChartDesc(figure string) string {
	t := p.Report.Total
	per := p.chartPer()
	switch figure {
	case "videos":
		return fmt.Sprintf("One bar per %s, most spent first: the videos it created in the range, %d in all.", per, t.Videos)
	case "seconds":
		return fmt.Sprintf("One bar per %s, most spent first: the seconds of video it was charged, %d in all.", per, t.Seconds)
	}
	return fmt.Sprintf("One bar per %s, most spent first: what its videos were charged, %s in all.", per, views.Money(t.SpentMicros))
}

// Share is a row's part of the range's spend (or, when nothing was charged, of its videos) in percent,
// the width of its bar.
func (p UsagePage) Share(r usage.Row) string {
	t := p.Report.Total
	switch {
	case t.SpentMicros > 0:
		return views.F1(100 * float64(r.SpentMicros) / float64(t.SpentMicros))
	case t.Videos > 0:
		return views.F1(100 * float64(r.Videos) / float64(t.Videos))
	}
	return "0"
}

// ShareLabel says what the bar shows, for people who cannot see it.
func (p UsagePage) ShareLabel(r usage.Row) string {
	if p.Report.Total.SpentMicros > 0 {
		return p.Share(r) + "% of the spend"
	}
	return p.Share(r) + "% of the videos"
}

// RowID is a row's id in the table ("row-2026-03-14", "row-model-…", "row-key-3").
func (p UsagePage) RowID(r usage.Row) string {
	switch p.Report.Group {
	case usage.ByDay:
		return "row-" + r.Day.Format(time.DateOnly)
	case usage.ByModel:
		return "row-model-" + r.Model
	}
	return fmt.Sprintf("row-key-%d", r.KeyID)
}

// GroupHeading names the table's first column.
func (p UsagePage) GroupHeading() string {
	switch p.Report.Group {
	case usage.ByModel:
		return "Model"
	case usage.ByKey:
		return "API key"
	}
	return "Day"
}

// MonthKey and MonthLabel write a statement's month for its link.
func MonthKey(m time.Time) string { return m.Format("2006-01") }

// MonthLabel writes a statement's month for people: "March 2026".
func MonthLabel(m time.Time) string { return m.Format("January 2006") }

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// StatementPage is one monthly statement, printable.
type StatementPage struct {
	S       *usage.Statement
	Account *models.Account
	Billing accounts.BillingDetails
	Zone    string
	Prev    string // the previous month's statement, "" when the account has none before
	Next    string // the next month's, "" for the month under way
}

// Period says which instants the statement covers, in the account's zone.
func (p StatementPage) Period() string {
	s := p.S
	first := s.Month.Format("January 2, 2006")
	if s.Partial {
		return first + " to " + s.At.In(s.Loc).Format("January 2, 2006 15:04 MST") + " (the month is not over)"
	}
	return first + " to " + s.End.AddDate(0, 0, -1).Format("January 2, 2006") + ", whole days in " + p.Zone
}

// Lines are the statement's summary between its opening and closing balances: every kind of money
// movement the month had (top-ups and charges always), each with what it changed the balance by.
func (p StatementPage) Lines() []StatementLine {
	s := p.S
	videos, seconds := s.ChargedVideos()
	lines := []StatementLine{
		{ID: "topups", Label: "Top-ups by card", Micros: s.Kind(models.KindTopup).Net(), Count: s.Kind(models.KindTopup).Count, Always: true},
		{ID: "test-topups", Label: "Test funds", Micros: s.Kind(models.KindTestTopup).Net(), Count: s.Kind(models.KindTestTopup).Count},
		{ID: "charges", Label: fmt.Sprintf("Charges for videos (%d %s, %d s)", videos, plural(videos, "video", "videos"), seconds),
			Micros: -s.Charged(), Count: s.Kind(models.KindSettle).Count, Always: true, Charges: true},
		{ID: "card-refunds", Label: "Card payments refunded to you", Micros: s.Kind(models.KindRefund).Net(), Count: s.Kind(models.KindRefund).Count, Always: true},
		{ID: "disputes", Label: "Card payments disputed", Micros: s.Kind(models.KindDispute).Net(), Count: s.Kind(models.KindDispute).Count},
		{ID: "disputes-won", Label: "Disputes closed in your favour", Micros: s.Kind(models.KindDisputeWon).Net(), Count: s.Kind(models.KindDisputeWon).Count},
		{ID: "adjustments", Label: "Adjustments by support", Micros: s.Kind(models.KindAdjustment).Net(), Count: s.Kind(models.KindAdjustment).Count, Always: true},
	}
	out := lines[:0]
	for _, l := range lines {
		if l.Always || l.Count > 0 {
			out = append(out, l)
		}
	}
	return out
}

// StatementLine is one line of a statement's summary.
type StatementLine struct {
	ID, Label string
	Micros    int64 // the change of the balance, signed
	Count     int64
	Always    bool // shown even when nothing of the kind happened
	Charges   bool // followed by the charges per model
}

// ReservedFor is the statement's movements of reserved money: held when a video was created, charged when
// it completed, returned in full when it failed or was cancelled.
func (p StatementPage) ReservedFor() (held, charged, returned int64) {
	s := p.S
	return s.Kind(models.KindReserve).Reserved, -s.Kind(models.KindSettle).Reserved, -s.Kind(models.KindRelease).Reserved
}

// ListedLabel names a listed entry (a payment, a refund, an adjustment). An adjustment's reason is
// support's own record: the customer reads only the note support wrote for them (docs/support.md).
func ListedLabel(e models.LedgerEntry) string {
	label := views.LedgerLabel(e)
	if e.Kind == models.KindAdjustment && e.CustomerNote != "" {
		label += ": " + e.CustomerNote
	}
	return label
}

// BillingForm is the billing details form on the Wallet page, as stored or as typed.
type BillingForm struct {
	accounts.BillingDetails
	Zones  []string // the zones offered; the account's own is among them
	Errors map[string]string
}

// ZoneOptions are the zones the select offers: UTC ("") first, then the list, with the account's own
// zone added when the list lacks it.
func (f BillingForm) ZoneOptions() []string {
	out := []string{}
	own := f.TimeZone == ""
	for _, z := range f.Zones {
		if z == "UTC" {
			continue
		}
		own = own || z == f.TimeZone
		out = append(out, z)
	}
	if !own {
		out = append([]string{f.TimeZone}, out...)
	}
	return out
}
