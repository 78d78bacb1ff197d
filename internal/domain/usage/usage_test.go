package usage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/usage"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

func openDB(t *testing.T, url string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReportDays: a task counts on its day in the account's zone — on the days a zone springs forward
// (23 hours) and falls back (25 hours), and in a zone 5:45 ahead of UTC, where a day starts at a quarter
// past a UTC hour — each a microsecond either side of the midnights.
func TestReportDays(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		acct := testkit.NewAccount(t, d, "")
		n := 0
		task := func(created time.Time) {
			t.Helper()
			n++
			if err := d.W.Create(&models.Task{ID: fmt.Sprintf("video_days%04d", n), AccountID: acct.ID, Model: "m", Prompt: "p", Seconds: 4, Size: "1x1",
				AspectRatio: "1:1", Inputs: "{}", Status: "completed", PriceMicros: 1, AmountMicros: int64(n), BillingState: "settled",
				NextCheckAt: created, QueueDeadline: created, CreatedAt: created.UTC(), UpdatedAt: created.UTC()}).Error; err != nil {
				t.Fatal(err)
			}
		}
		ny, _ := time.LoadLocation("America/New_York")
		kathmandu, _ := time.LoadLocation("Asia/Kathmandu")
		at := func(loc *time.Location, day string, hour, minute int) time.Time {
			d, _ := time.ParseInLocation(time.DateOnly, day, loc)
			return d.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
		}
		// New York springs forward on 2026-03-08 and falls back on 2026-11-01.
		task(at(ny, "2026-03-08", 0, 0).Add(-time.Microsecond)) // 03-07
		task(at(ny, "2026-03-08", 0, 0))                        // 03-08
		task(at(ny, "2026-03-08", 22, 59))                      // 03-08, its 23rd hour (03:59 UTC on 03-09)
		task(at(ny, "2026-03-09", 0, 0))                        // 03-09
		task(at(ny, "2026-11-01", 0, 30))                       // 11-01, still EDT
		task(at(ny, "2026-11-01", 24, 59))                      // 11-01's 25th hour: 23:59 EST
		task(at(ny, "2026-11-02", 0, 0))                        // 11-02

		check := func(loc *time.Location, from, to string, want map[string]int64) {
			t.Helper()
			r, errs := usage.Query{From: from, To: to}.Parse(loc, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
			if errs != nil {
				t.Fatal(errs)
			}
			rep, err := usage.Build(context.Background(), d, acct.ID, r)
			if err != nil {
				t.Fatal(err)
			}
			var total int64
			for _, row := range rep.Rows {
				day := row.Day.Format(time.DateOnly)
				if row.Videos != want[day] {
					t.Errorf("%s %s: %d videos, want %d", loc, day, row.Videos, want[day])
				}
				if row.Day.Location() != loc || row.Day.Hour() != 0 {
					t.Errorf("%s: day %s does not start at midnight there", loc, row.Day)
				}
				total += row.Videos
			}
			if total != rep.Total.Videos {
				t.Errorf("%s: rows sum to %d, total %d", loc, total, rep.Total.Videos)
			}
		}
		check(ny, "2026-03-07", "2026-03-09", map[string]int64{"2026-03-07": 1, "2026-03-08": 2, "2026-03-09": 1})
		check(ny, "2026-10-31", "2026-11-02", map[string]int64{"2026-11-01": 2, "2026-11-02": 1})

		task(at(kathmandu, "2026-05-10", 0, 0).Add(-time.Microsecond)) // 18:14:59.999999 UTC on 05-09
		task(at(kathmandu, "2026-05-10", 0, 0))                        // 18:15 UTC
		check(kathmandu, "2026-05-09", "2026-05-10", map[string]int64{"2026-05-09": 1, "2026-05-10": 1})
	})
}

// TestStatementRefusesALedgerThatDoesNotClose: an entry whose balances after it are not the previous
// ones plus its change makes the month's statement an error, never a page that does not add up.
func TestStatementRefusesALedgerThatDoesNotClose(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		acct := testkit.NewAccount(t, d, "10")
		var a models.Account
		d.R.Take(&a, acct.ID)
		loc := time.UTC
		month := usage.MonthOf(a.CreatedAt, loc)
		ctx := context.Background()
		s, err := usage.BuildStatement(ctx, d, &a, month, a.CreatedAt.Add(time.Hour))
		if err != nil || s.Closing.Total() != 10_000_000 || s.Kind(models.KindTestTopup).Net() != 10_000_000 {
			t.Fatalf("the statement of a sound ledger: %+v %v", s, err)
		}
		// A second entry claims 3 more than it moved.
		if err := d.W.Create(&models.LedgerEntry{AccountID: a.ID, Kind: models.KindAdjustment, DeltaAvailable: 1, AvailableAfter: 10_000_004,
			CreatedAt: a.CreatedAt.Add(time.Minute)}).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := usage.BuildStatement(ctx, d, &a, month, a.CreatedAt.Add(time.Hour)); err == nil || !strings.Contains(err.Error(), "does not close") {
			t.Fatalf("the statement of a ledger that does not close: %v", err)
		}
	})
}

// TestStatementOfALedgerWrittenOutOfTimeOrder: entries recorded in another order than their clocks
// stamped them — a credit stamped three hours into a month recorded before one stamped a microsecond
// before it — still give months that close exactly and join: the first month's closing is the second's
// opening, and every entry is in exactly one of them.
func TestStatementOfALedgerWrittenOutOfTimeOrder(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		acct := testkit.NewAccount(t, d, "")
		start := time.Date(2030, 5, 1, 0, 0, 0, 0, time.UTC)
		var balance int64
		for _, e := range []struct {
			at     time.Time
			micros int64
		}{{start.AddDate(0, 0, -10), 10_000_000}, {start.Add(3 * time.Hour), 1_000_000}, {start.Add(-time.Microsecond), 2_000_000}} {
			balance += e.micros
			if err := d.W.Create(&models.LedgerEntry{AccountID: acct.ID, Kind: models.KindAdjustment, DeltaAvailable: e.micros,
				AvailableAfter: balance, Reason: "test", CreatedAt: e.at}).Error; err != nil {
				t.Fatal(err)
			}
		}
		a := models.Account{ID: acct.ID, CreatedAt: start.AddDate(0, -1, 0)}
		now := start.AddDate(0, 2, 0)
		april, err := usage.BuildStatement(context.Background(), d, &a, start.AddDate(0, -1, 0), now)
		if err != nil {
			t.Fatal(err)
		}
		may, err := usage.BuildStatement(context.Background(), d, &a, start, now)
		if err != nil {
			t.Fatal(err)
		}
		if april.Closing != may.Opening || may.Closing.Total() != 13_000_000 || april.Opening.Total() != 0 {
			t.Errorf("April %+v → %+v, May %+v → %+v", april.Opening, april.Closing, may.Opening, may.Closing)
		}
		if n := april.Entries + may.Entries; n != 3 {
			t.Errorf("%d entries in April and May, want the 3 once each", n)
		}
	})
}

// TestMonths: the months with statements are those in which an entry was stamped, counted in the
// account's zone — an entry at 22:00 on March 31 in New York (02:00 UTC on April 1) is March's there and
// April's in UTC, one at midnight on June 1 is June's — newest first, with the months between them that
// have none left out, an entry stamped after now not counted, and nothing for an account without entries.
func TestMonths(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		acct := testkit.NewAccount(t, d, "")
		ny, _ := time.LoadLocation("America/New_York")
		now := time.Date(2030, 7, 15, 12, 0, 0, 0, ny)
		ctx := context.Background()
		if got, err := usage.Months(ctx, d, acct.ID, ny, now); err != nil || len(got) != 0 {
			t.Fatalf("an account without entries: %v %v", got, err)
		}
		var balance int64
		for _, at := range []time.Time{
			time.Date(2029, 11, 20, 9, 0, 0, 0, ny),
			time.Date(2030, 1, 1, 0, 0, 0, 0, ny),
			time.Date(2030, 3, 2, 8, 0, 0, 0, ny),
			time.Date(2030, 3, 31, 22, 0, 0, 0, ny),   // 02:00 UTC on April 1
			time.Date(2030, 5, 31, 23, 59, 59, 0, ny), // May, a second before June
			time.Date(2030, 6, 1, 0, 0, 0, 0, ny),
			now.Add(time.Hour), // after now: not yet on any statement
		} {
			balance++
			if err := d.W.Create(&models.LedgerEntry{AccountID: acct.ID, Kind: models.KindAdjustment, DeltaAvailable: 1,
				AvailableAfter: balance, Reason: "test", CreatedAt: at.UTC()}).Error; err != nil {
				t.Fatal(err)
			}
		}
		check := func(loc *time.Location, want ...string) {
			t.Helper()
			got, err := usage.Months(ctx, d, acct.ID, loc, now)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range got {
				if m.Location() != loc || m.Day() != 1 || m.Hour() != 0 {
					t.Errorf("%s: month %s does not start at its first midnight there", loc, m)
				}
				keys = append(keys, m.Format("2006-01"))
			}
			if strings.Join(keys, " ") != strings.Join(want, " ") {
				t.Errorf("%s: months %v, want %v", loc, keys, want)
			}
		}
		check(ny, "2030-06", "2030-05", "2030-03", "2030-01", "2029-11")
		// In UTC the New York March 31 entry is April's and the May 31 one June's.
		check(time.UTC, "2030-06", "2030-04", "2030-03", "2030-01", "2029-11")
	})
}
