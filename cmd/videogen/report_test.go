package main_test

import (
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/staff/margin/margintest"
	"videogen/internal/testkit"
	"videogen/models"
)

// reportMargin runs `videogen report margin args...` (GORACE as in ledger check: no second of sleep at
// exit).
func reportMargin(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	env = maps.Clone(env)
	env["GORACE"] = "atexit_sleep_ms=0"
	return run(t, dir, env, append([]string{"report", "margin"}, args...)...)
}

// TestReportMargin prints margintest's story (internal/staff/margin checks the figures) as the operator sees it:
// the table, exact to the micro-dollar, with each model's subtotal, the total and the warning about the
// task without a recorded cost; the same as CSV, byte for byte; the last 30 days by default. Bad dates
// and ranges exit 2 with a message and print nothing; an unreachable database too.
func TestReportMargin(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL}
		d := testkit.OpenDB(t, dbURL)
		margintest.Seed(t, d)

		out, stderr, code := reportMargin(t, dir, env, "--from", "2026-03-01", "--to", "2026-03-02")
		if code != 0 {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		wantTable := `margin from 2026-03-01 to 2026-03-02 (UTC days), in USD: tasks charged, by the day they completed

DAY         MODEL                   TASKS   REVENUE      COST     MARGIN  MARGIN %  UNCOSTED
2026-03-01  videogen-2.0-720p           2  4.320000  1.440000   2.880000     66.7%         0
2026-03-01  videogen-2.0-mini-480p      1  0.123457  0.180000  -0.056543    -45.8%         0
2026-03-02  videogen-2.0-720p           1  1.440000  0.720000   0.720000     50.0%         0
2026-03-02  videogen-2.0-mini-480p      2  1.234570  0.450000   0.784570     63.6%         1

all days    videogen-2.0-720p           3  5.760000  2.160000   3.600000     62.5%         0
all days    videogen-2.0-mini-480p      3  1.358027  0.630000   0.728027     53.6%         1

all days    all models                  6  7.118027  2.790000   4.328027     60.8%         1

tasks without a recorded upstream cost (UNCOSTED): 1 of 6. They count as costing 0, so the margin shown is too high.
`
		if out != wantTable {
			t.Errorf("table:\n%s\nwant:\n%s", out, wantTable)
		}

		out, stderr, code = reportMargin(t, dir, env, "--from", "2026-03-01", "--to", "2026-03-02", "--csv")
		if code != 0 {
			t.Fatalf("report --csv: exit %d: %s", code, stderr)
		}
		wantCSV := `row,day,model,tasks,revenue_usd,cost_usd,margin_usd,margin_pct,uncosted,revenue_micros,cost_micros,margin_micros
day,2026-03-01,videogen-2.0-720p,2,4.320000,1.440000,2.880000,66.7,0,4320000,1440000,2880000
day,2026-03-01,videogen-2.0-mini-480p,1,0.123457,0.180000,-0.056543,-45.8,0,123457,180000,-56543
day,2026-03-02,videogen-2.0-720p,1,1.440000,0.720000,0.720000,50.0,0,1440000,720000,720000
day,2026-03-02,videogen-2.0-mini-480p,2,1.234570,0.450000,0.784570,63.6,1,1234570,450000,784570
model_total,,videogen-2.0-720p,3,5.760000,2.160000,3.600000,62.5,0,5760000,2160000,3600000
model_total,,videogen-2.0-mini-480p,3,1.358027,0.630000,0.728027,53.6,1,1358027,630000,728027
total,,,6,7.118027,2.790000,4.328027,60.8,1,7118027,2790000,4328027
`
		if out != wantCSV {
			t.Errorf("CSV:\n%s\nwant:\n%s", out, wantCSV)
		}

		// Nothing charged in the range: a sentence, or the CSV's header and a total of zero.
		out, _, code = reportMargin(t, dir, env, "--from", "2026-02-01", "--to", "2026-02-27")
		if code != 0 || out != "no task was charged from 2026-02-01 to 2026-02-27 (UTC days)\n" {
			t.Errorf("an empty range: exit %d %q", code, out)
		}
		out, _, code = reportMargin(t, dir, env, "--from", "2026-02-01", "--to", "2026-02-27", "--csv")
		if code != 0 || out != strings.SplitN(wantCSV, "\n", 2)[0]+"\ntotal,,,0,0.000000,0.000000,0.000000,,0,0,0,0\n" {
			t.Errorf("an empty range as CSV: exit %d %q", code, out)
		}

		// By default the 30 UTC days up to today: a task charged now is in, the story's are not.
		acct := testkit.NewAccount(t, d, "0")
		completed := db.Now()
		cred := margintest.Cheap
		cost := int64(4 * margintest.CheapCost)
		if err := d.W.Create(&models.Task{ID: "video_margintoday", AccountID: acct.ID, Model: margintest.HD, Prompt: "today", Seconds: 4,
			Size: "1280x720", AspectRatio: "16:9", Inputs: "{}", Status: "completed", PriceMicros: margintest.HDPrice,
			AmountMicros: 4 * margintest.HDPrice, BillingState: "settled", CredentialID: &cred, UpstreamCostMicros: &cost,
			NextCheckAt: completed, QueueDeadline: completed, CompletedAt: &completed}).Error; err != nil {
			t.Fatal(err)
		}
		out, stderr, code = reportMargin(t, dir, env)
		today := time.Now().UTC()
		if today.Format(time.DateOnly) != completed.Format(time.DateOnly) {
			t.Log("midnight UTC passed during the test: the default range is not checked")
		} else {
			day := today.Format(time.DateOnly)
			first := today.AddDate(0, 0, -29).Format(time.DateOnly)
			// The columns are as wide as this table's cells: compare the words.
			words := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
			if code != 0 || !strings.HasPrefix(out, "margin from "+first+" to "+day+" ") ||
				!strings.Contains(words, "\n"+day+" videogen-2.0-720p 1 1.440000 0.360000 1.080000 75.0% 0\n") ||
				!strings.Contains(words, "\nall days all models 1 1.440000 0.360000 1.080000 75.0% 0\n") {
				t.Errorf("the default range: exit %d\n%s%s", code, out, stderr)
			}
		}

		daysAgo := func(n int) string { return time.Now().UTC().AddDate(0, 0, -n).Format(time.DateOnly) }
		for _, c := range []struct {
			name   string
			args   []string
			code   int
			output string // in stdout when the exit status is 0, in stderr otherwise
		}{
			{"366 days", []string{"--from", "2025-03-01", "--to", "2026-03-01"}, 0, "margin from 2025-03-01 to 2026-03-01 "},
			{"--to alone: the 30 days up to it", []string{"--to", "2026-03-02"}, 0, "margin from 2026-02-01 to 2026-03-02 "},
			{"--from alone: up to today", []string{"--from", daysAgo(3)}, 0, "margin from " + daysAgo(3) + " to "},
			{"a day not YYYY-MM-DD", []string{"--from", "2026-3-1"}, 2, `--from "2026-3-1" is not a day: use YYYY-MM-DD`},
			{"no such day", []string{"--to", "2026-02-30"}, 2, `--to "2026-02-30" is not a day`},
			{"a time, not a day", []string{"--to", "2026-03-02T10:00:00Z"}, 2, `--to "2026-03-02T10:00:00Z" is not a day`},
			{"--from after --to", []string{"--from", "2026-03-02", "--to", "2026-03-01"}, 2, "2026-03-02 is after 2026-03-01"},
			{"--from after today", []string{"--from", time.Now().UTC().AddDate(0, 0, 2).Format(time.DateOnly)}, 2, "is after"},
			{"367 days", []string{"--from", "2025-03-01", "--to", "2026-03-02"}, 2, "is 367 days, at most 366"},
			{"an argument", []string{"march"}, 2, "report margin --help"},
			{"an unknown flag", []string{"--since", "720h"}, 2, "unknown flag: --since"},
		} {
			t.Run(c.name, func(t *testing.T) {
				out, stderr, code := reportMargin(t, dir, env, c.args...)
				if code != c.code {
					t.Fatalf("exit %d, want %d\n%s%s", code, c.code, out, stderr)
				}
				if c.code == 0 && !strings.HasPrefix(out, c.output) {
					t.Errorf("stdout %q, want it to start %q", out, c.output)
				}
				if c.code != 0 && (!strings.Contains(stderr, c.output) || out != "") {
					t.Errorf("stderr %q, want it to hold %q; stdout %q, want nothing", stderr, c.output, out)
				}
			})
		}

		unreachable := maps.Clone(env)
		unreachable["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
		if out, stderr, code := reportMargin(t, dir, unreachable); code != 2 || out != "" {
			t.Errorf("an unreachable database: exit %d %q %q, want 2 and nothing printed", code, out, stderr)
		}
	})
}
