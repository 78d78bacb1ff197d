package staff

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"videogen/views"

	"videogen/internal/domain/upstream/status"
	"videogen/internal/staff/ops"
	"videogen/models"
)

// OverviewPage is the staff overview (/support): the platform's figures as internal/staff/ops read them.
type OverviewPage struct {
	*ops.Overview
	// Upstreams is each credential's health as the running instances report it (docs/upstreams.md#health).
	Upstreams []status.Row
}

// Today is the chart's last day: today, UTC.
func (o OverviewPage) Today() ops.Day {
	if len(o.Days) == 0 {
		return ops.Day{}
	}
	return o.Days[len(o.Days)-1]
}

// TasksTotal is the tasks created over the chart's days.
func (o OverviewPage) TasksTotal() int64 {
	var n int64
	for _, d := range o.Days {
		n += d.Tasks
	}
	return n
}

// ChargedTotal is what was charged over the chart's days, to the micro-dollar.
func (o OverviewPage) ChargedTotal() int64 {
	var n int64
	for _, d := range o.Days {
		n += d.ChargedMicros
	}
	return n
}

// MostTasks is the busiest day's task count, for the axis label.
func (o OverviewPage) MostTasks() int64 {
	var most int64
	for _, d := range o.Days {
		most = max(most, d.Tasks)
	}
	return most
}

// MostCharged is the largest day's charges, for the axis label.
func (o OverviewPage) MostCharged() int64 {
	var most int64
	for _, d := range o.Days {
		most = max(most, d.ChargedMicros)
	}
	return most
}

// TaskBars are the tasks created per day, each bar saying how many completed and failed.
func (o OverviewPage) TaskBars() []views.Bar {
	values, labels := make([]int64, len(o.Days)), make([]string, len(o.Days))
	for i, d := range o.Days {
		values[i] = d.Tasks
		labels[i] = fmt.Sprintf("%s UTC: %d %s (%d completed, %d failed)", d.Day.Format("Jan 2"), d.Tasks, plural(d.Tasks, "task", "tasks"), d.Completed, d.Failed)
	}
	return views.BarsOf(values, labels)
}

// ChargeBars are the charges (settlements) per day.
func (o OverviewPage) ChargeBars() []views.Bar {
	values, labels := make([]int64, len(o.Days)), make([]string, len(o.Days))
	for i, d := range o.Days {
		values[i], labels[i] = d.ChargedMicros, fmt.Sprintf("%s UTC: %s", d.Day.Format("Jan 2"), views.Money(d.ChargedMicros))
	}
	return views.BarsOf(values, labels)
}

// FirstDay and LastDay label the charts' ends.
func (o OverviewPage) FirstDay() string { return dayLabel(o.Days, 0) }

// LastDay labels the charts' right end.
func (o OverviewPage) LastDay() string { return dayLabel(o.Days, len(o.Days)-1) }

func dayLabel(days []ops.Day, i int) string {
	if i < 0 || i >= len(days) {
		return ""
	}
	return days[i].Day.Format("Jan 2")
}

// CheckAccounts are the accounts the ledger check found drifted.
func CheckAccounts(c *models.LedgerCheck) []int64 {
	var out []int64
	for _, s := range strings.Split(c.Accounts, ",") {
		if id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// Age formats a wait for people: "45s", "12m 5s", "3h 20m", "2d 4h".
func Age(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Percent formats a share from 0 to 1: "12.5%".
func Percent(share float64) string { return strconv.FormatFloat(share*100, 'f', 1, 64) + "%" }

// UpstreamLoadClass is LoadClass for a credential's health row.
func UpstreamLoadClass(r status.Row) string {
	return LoadClass(ops.Credential{InFlight: r.InFlight, MaxConcurrency: r.MaxConcurrency, Enabled: r.Enabled && r.AuthError == ""})
}

// BreakerClass colours a circuit breaker's state: open is trouble, half-open is being probed.
func BreakerClass(b string) string {
	switch b {
	case status.BreakerClosed:
		return "completed"
	case status.BreakerHalfOpen:
		return "queued"
	case status.BreakerOpen:
		return "failed"
	}
	return "muted"
}

// Latencies formats a credential's latency percentiles.
func Latencies(r status.Row) string {
	if r.Calls == 0 {
		return "–"
	}
	return fmt.Sprintf("%d / %d / %d ms", r.P50Ms, r.P95Ms, r.P99Ms)
}

// LoadClass names a credential's load for the badge colour: full, busy (half or more) or idle.
func LoadClass(c ops.Credential) string {
	switch {
	case !c.Enabled:
		return "failed"
	case c.MaxConcurrency > 0 && c.InFlight >= c.MaxConcurrency:
		return "in_progress"
	case c.InFlight > 0:
		return "queued"
	}
	return "completed"
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func accountHref(id int64) string { return "/support/accounts/" + strconv.FormatInt(id, 10) }

// ClosedRouteLines says, one line per model, which routes of the credential the provider refused (the
// model not served or not activated for the key): only those take no new task, until a reload.
func ClosedRouteLines(r status.Row) []string {
	aliases := slices.Sorted(maps.Keys(r.ClosedRoutes))
	out := make([]string, len(aliases))
	for i, alias := range aliases {
		out[i] = alias + " refused by the provider (activate the model or fix upstream_model, then reload): " + r.ClosedRoutes[alias]
	}
	return out
}

// JobWait is a queue's longest wait for a worker, as the overview shows it: "—" when none waits.
func JobWait(d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	return d.Round(time.Second).String()
}

// JobState says a job's state in words.
func JobState(s string) string {
	if s == "discarded" {
		return "given up"
	}
	return "retrying"
}

// jobErrorWhen is ", at <time>" for an error with a time, else nothing.
func jobErrorWhen(v views.Viewer, e ops.JobError) string {
	if e.At.IsZero() {
		return ""
	}
	return ", " + v.When(e.At)
}
