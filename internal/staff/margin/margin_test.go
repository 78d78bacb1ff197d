package margin_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"videogen/internal/money"
	"videogen/internal/staff/margin"
	"videogen/internal/staff/margin/margintest"
	"videogen/internal/testkit"
)

func figures(tasks int64, revenue, cost money.Micros, uncosted int64) margin.Figures {
	return margin.Figures{Tasks: tasks, Revenue: revenue, Cost: cost, Uncosted: uncosted}
}

// TestReport: the seeded tasks are summed per UTC day and model to the micro-dollar — a task a
// microsecond before midnight on its day, one at midnight on the next, one written in New York time on
// its UTC day — with the uncosted task counted as such; a released task, tasks just outside the range
// (one of them on the range's last day in Los Angeles time) and a running task earn and cost nothing.
func TestReport(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := testkit.OpenDB(t, url)
		margintest.Seed(t, d)
		// Any time of the days will do: the report reads whole UTC days.
		res, err := margin.Report(context.Background(), d, margintest.Day1.Add(23*time.Hour), margintest.Day2.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		hd, mini := margintest.HD, margintest.Mini
		want := margin.Result{
			From: margintest.Day1,
			To:   margintest.Day2,
			Rows: []margin.Row{
				{Day: margintest.Day1, Model: hd, Figures: figures(2, 4_320_000, 1_440_000, 0)},
				{Day: margintest.Day1, Model: mini, Figures: figures(1, 123_457, 180_000, 0)},
				{Day: margintest.Day2, Model: hd, Figures: figures(1, 1_440_000, 720_000, 0)},
				{Day: margintest.Day2, Model: mini, Figures: figures(2, 1_234_570, 450_000, 1)},
			},
			Models: []margin.ModelTotal{
				{Model: hd, Figures: figures(3, 5_760_000, 2_160_000, 0)},
				{Model: mini, Figures: figures(3, 1_358_027, 630_000, 1)},
			},
			Total: figures(6, 7_118_027, 2_790_000, 1),
		}
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("report:\n got %+v\nwant %+v", res, want)
		}
		margins := []struct {
			f       margin.Figures
			micros  money.Micros
			percent string
		}{
			{res.Rows[0].Figures, 2_880_000, "66.7%"},
			{res.Rows[1].Figures, -56_543, "-45.8%"},
			{res.Rows[2].Figures, 720_000, "50.0%"},
			{res.Rows[3].Figures, 784_570, "63.6%"},
			{res.Models[0].Figures, 3_600_000, "62.5%"},
			{res.Models[1].Figures, 728_027, "53.6%"},
			{res.Total, 4_328_027, "60.8%"},
		}
		for _, m := range margins {
			if m.f.Margin() != m.micros || m.f.MarginPercent() != m.percent {
				t.Errorf("%+v: margin %s (%s), want %s (%s)", m.f, m.f.Margin(), m.f.MarginPercent(), m.micros, m.percent)
			}
		}

		// A day with nothing settled has no rows, and totals of zero.
		empty, err := margin.Report(context.Background(), d, margintest.Day1.AddDate(0, 0, -10), margintest.Day1.AddDate(0, 0, -2))
		if err != nil {
			t.Fatal(err)
		}
		if len(empty.Rows) != 0 || len(empty.Models) != 0 || empty.Total != (margin.Figures{}) || empty.Total.MarginPercent() != "–" {
			t.Errorf("a range without settled tasks: %+v", empty)
		}
		// The range is checked before anything is read.
		if _, err := margin.Report(context.Background(), d, margintest.Day2, margintest.Day1); !errors.Is(err, margin.ErrRange) {
			t.Errorf("from after to: %v, want ErrRange", err)
		}
	})
}

func TestCheckRange(t *testing.T) {
	day := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
		ok       bool
		wantFrom string
	}{
		{"one day", day("2026-03-01"), day("2026-03-01"), true, "2026-03-01"},
		{"a leap year", day("2028-01-01"), day("2028-12-31"), true, "2028-01-01"},
		{"366 days across a leap day", day("2027-03-02"), day("2028-03-01"), true, "2027-03-02"},
		{"367 days", day("2027-03-01"), day("2028-03-01"), false, ""},
		{"backwards", day("2026-03-02"), day("2026-03-01"), false, ""},
		// Half past midnight in Paris is still the previous day in UTC.
		{"a time in another zone", time.Date(2026, 3, 2, 0, 30, 0, 0, paris), day("2026-03-02"), true, "2026-03-01"},
	} {
		t.Run(c.name, func(t *testing.T) {
			from, to, err := margin.CheckRange(c.from, c.to)
			if !c.ok {
				if !errors.Is(err, margin.ErrRange) {
					t.Fatalf("got %v, want ErrRange", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if from.Format(time.DateOnly) != c.wantFrom || from.Location() != time.UTC || to.Location() != time.UTC || to.Hour() != 0 {
				t.Errorf("got %v to %v, want from %s, both midnight UTC", from, to, c.wantFrom)
			}
		})
	}
}

// TestMarginPercent: tenths of a percent, rounded half away from zero in exact integers, on either side
// of zero and beyond int64 when multiplied.
func TestMarginPercent(t *testing.T) {
	for _, c := range []struct {
		revenue, cost money.Micros
		want          string
	}{
		{0, 0, "–"},
		{0, 5, "–"},
		{1_000_000, 0, "100.0%"},
		{1_000_000, 1_000_000, "0.0%"},
		{2_000, 1_999, "0.1%"},          // 0.05% rounds up
		{2_000, 2_001, "-0.1%"},         // -0.05% rounds away from zero
		{2_001, 2_000, "0.0%"},          // 0.0499…%
		{3_000_000, 2_000_000, "33.3%"}, // 33.33…%
		{3_000_000, 1_000_000, "66.7%"},
		{1_000_000, 3_000_000, "-200.0%"},
		{math.MaxInt64 / 2, 0, "100.0%"},                 // ×1000 is beyond int64
		{1, math.MaxInt64 / 2, "-922337203685477580.8%"}, // clamped: a percentage this size means nothing anyway
	} {
		f := margin.Figures{Revenue: c.revenue, Cost: c.cost}
		if got := f.MarginPercent(); got != c.want {
			t.Errorf("revenue %d, cost %d: %q, want %q", c.revenue, c.cost, got, c.want)
		}
	}
}
