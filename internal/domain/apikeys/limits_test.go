package apikeys

import (
	"errors"
	"slices"
	"testing"
	"time"

	"videogen/internal/money"
)

// TestParseLimits: the form's and the command line's values, read exactly or refused by field.
func TestParseLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		spend, period string
		models        []string
		scopes        []string
		want          Limits
		bad           []string // fields refused
	}{
		{name: "none", want: Limits{}},
		{name: "period alone is ignored", period: "day", want: Limits{}},
		{name: "per day", spend: "5", period: "day", want: Limits{Spend: 5 * money.PerUSD, Period: PeriodDay}},
		{name: "exact micro-dollars", spend: "$12.000001", period: "month", want: Limits{Spend: 12_000_001, Period: PeriodMonth}},
		{name: "models in catalog order, once", models: []string{"videogen-2.0-mini-480p", " videogen-2.0-720p", "videogen-2.0-mini-480p", ""},
			want: Limits{Models: []string{"videogen-2.0-720p", "videogen-2.0-mini-480p"}}},
		{name: "zero", spend: "0", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "zero cents", spend: "0.00", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "negative", spend: "-5", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "words", spend: "five", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "seven decimals", spend: "1.0000001", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "exponent", spend: "1e3", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "too large", spend: "1000000.01", period: "day", bad: []string{"spend_limit_usd"}},
		{name: "no period", spend: "5", bad: []string{"limit_period"}},
		{name: "a week", spend: "5", period: "week", bad: []string{"limit_period"}},
		{name: "a bad period without a limit", period: "year", bad: []string{"limit_period"}},
		{name: "unknown model", models: []string{"sora-2"}, bad: []string{"models"}},
		{name: "webhooks scope", scopes: []string{"webhooks:write", "webhooks:write"}, want: Limits{Scopes: []string{"webhooks:write"}}},
		{name: "unknown scope", scopes: []string{"admin"}, bad: []string{"scopes"}},
		{name: "all wrong", spend: "-1", period: "hour", models: []string{"x"}, bad: []string{"limit_period", "models", "spend_limit_usd"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseLimits(tc.spend, tc.period, tc.models, tc.scopes)
			if tc.bad == nil {
				if err != nil || got.Spend != tc.want.Spend || got.Period != tc.want.Period || !slices.Equal(got.Models, tc.want.Models) || !slices.Equal(got.Scopes, tc.want.Scopes) {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			var bad *InvalidLimits
			if !errors.As(err, &bad) {
				t.Fatalf("got %+v, %v; want fields %v refused", got, err, tc.bad)
			}
			var fields []string
			for f, msg := range bad.Fields {
				if msg == "" {
					t.Errorf("%s refused without a message", f)
				}
				fields = append(fields, f)
			}
			slices.Sort(fields)
			if !slices.Equal(fields, tc.bad) {
				t.Fatalf("refused %v (%v), want %v", fields, err, tc.bad)
			}
		})
	}
}

// TestPeriodOf: days and months begin at midnight in the account's zone, across daylight-saving
// changes (a 23-hour and a 25-hour day in Berlin) and year ends.
func TestPeriodOf(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		period, now string
		loc         *time.Location
		start, end  string
		hours       float64
	}{
		{PeriodDay, "2026-11-26T22:30:00Z", berlin, "2026-11-26T00:00:00+01:00", "2026-11-27T00:00:00+01:00", 24},
		{PeriodDay, "2026-11-26T23:10:00Z", berlin, "2026-11-27T00:00:00+01:00", "2026-11-28T00:00:00+01:00", 24}, // already tomorrow in Berlin
		{PeriodDay, "2026-03-29T12:00:00Z", berlin, "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23},
		{PeriodDay, "2026-10-25T12:00:00Z", berlin, "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25},
		{PeriodDay, "2026-11-26T23:10:00Z", time.UTC, "2026-11-26T00:00:00Z", "2026-11-27T00:00:00Z", 24},
		{PeriodMonth, "2026-12-31T23:30:00Z", berlin, "2027-01-01T00:00:00+01:00", "2027-02-01T00:00:00+01:00", 31 * 24},
		{PeriodMonth, "2026-12-31T23:30:00Z", time.UTC, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", 31 * 24},
		{PeriodMonth, "2026-03-15T12:00:00Z", berlin, "2026-03-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 31*24 - 1},
	} {
		start, end := PeriodOf(tc.period, at(tc.now), tc.loc)
		if start.Format(time.RFC3339) != tc.start || end.Format(time.RFC3339) != tc.end || end.Sub(start).Hours() != tc.hours {
			t.Errorf("%s at %s in %s: %s – %s (%v h), want %s – %s (%v h)", tc.period, tc.now, tc.loc,
				start.Format(time.RFC3339), end.Format(time.RFC3339), end.Sub(start).Hours(), tc.start, tc.end, tc.hours)
		}
	}
}
