package handlers_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"html"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/audit"
	"videogen/internal/money"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// movedClock is the server's clock in these tests: real time, moved forward to the instants a story
// needs (a minute before a midnight, the next months). It only ever moves forward, as time does.
type movedClock struct{ ahead atomic.Int64 }

func (c *movedClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

// To moves the clock so that it reads at now.
func (c *movedClock) To(t *testing.T, at time.Time) {
	t.Helper()
	if at.Before(c.Now()) {
		t.Fatalf("the clock would go back from %s to %s", c.Now(), at)
	}
	c.ahead.Store(int64(time.Until(at)))
}

// usageFigures are one row of the Usage page or of its CSV.
type usageFigures struct {
	Label                              string // the row's id on the page ("row-2026-03-14"), its first cell in the CSV
	Videos, Completed, Failed, Seconds int64
	Cancelled                          int64
	Spent                              int64 // micro-dollars
}

var (
	usageRowRE = regexp.MustCompile(`(?s)<tr id="(row-[^"]+)"[^>]*>(.*?)</tr>`)
	cellRE     = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
	tagRE      = regexp.MustCompile(`<[^>]+>`)
	moneyRE    = regexp.MustCompile(`[+−-]?\$[0-9]+\.[0-9]+`)
)

// parseMoney reads an amount as the console writes it ("$12.30", "+$1.234567", "−$0.20") in micro-dollars.
func parseMoney(t *testing.T, s string) int64 {
	t.Helper()
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "−") || strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+−-")
	m, err := money.ParseUSD(s)
	if err != nil {
		t.Fatalf("not an amount: %q", s)
	}
	if neg {
		m = -m
	}
	return int64(m)
}

func cellText(s string) string {
	return strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(s, " ")))
}

// pageUsage reads the Usage page's table: its rows in order, then the total row.
func pageUsage(t *testing.T, body string) []usageFigures {
	t.Helper()
	var out []usageFigures
	for _, m := range usageRowRE.FindAllStringSubmatch(body, -1) {
		cells := cellRE.FindAllStringSubmatch(m[2], -1)
		if len(cells) < 4 {
			t.Fatalf("row %s has %d cells", m[1], len(cells))
		}
		// Videos, with what became of them beneath ("3 2 completed · 1 failed"); seconds; spend.
		videos := regexp.MustCompile(`^([0-9]+)(?:\s+([0-9]+) completed · ([0-9]+) failed(?:\s+· ([0-9]+) cancelled)?)?`).FindStringSubmatch(cellText(cells[1][1]))
		if videos == nil {
			t.Fatalf("row %s: videos %q", m[1], cellText(cells[1][1]))
		}
		n := func(s string) int64 {
			v, _ := strconv.ParseInt(s, 10, 64)
			return v
		}
		seconds, err := strconv.ParseInt(cellText(cells[2][1]), 10, 64)
		if err != nil {
			t.Fatalf("row %s: seconds %q", m[1], cells[2][1])
		}
		spend := moneyRE.FindString(cellText(cells[3][1]))
		out = append(out, usageFigures{Label: m[1], Videos: n(videos[1]), Completed: n(videos[2]), Failed: n(videos[3]), Cancelled: n(videos[4]), Seconds: seconds, Spent: parseMoney(t, spend)})
	}
	return out
}

// usageBar is one bar of a model or key chart on the Usage page.
type usageBar struct {
	Name, Figure string
	Width        float64
}

var (
	rowChartRE = regexp.MustCompile(`(?s)<svg id="chart-([a-z]+)" class="chart hchart" viewBox="0 0 600 ([0-9.]+)" role="img" aria-labelledby="[^"]+">\s*<title id="[^"]+">([^<]+)</title>\s*<desc id="[^"]+">([^<]+)</desc>(.*?)</svg>`)
	hbarRE     = regexp.MustCompile(`(?s)<g class="hbar">\s*<title>([^<]*)</title>\s*<text[^>]*>([^<]*)</text>\s*<text[^>]*>([^<]*)</text>\s*<rect class="track"[^>]*></rect>\s*<rect class="bar" x="0" y="[0-9.]+" width="([0-9.]+)"`)
)

// usageCharts reads the Usage page's model or key charts: per figure ("videos", "seconds", "spend"),
// its title and description, then its bars top to bottom.
func usageCharts(t *testing.T, body string) map[string][]usageBar {
	t.Helper()
	out := map[string][]usageBar{}
	for _, m := range rowChartRE.FindAllStringSubmatch(body, -1) {
		out[m[1]+" title"] = []usageBar{{Name: html.UnescapeString(m[3]), Figure: html.UnescapeString(m[4])}}
		for _, b := range hbarRE.FindAllStringSubmatch(m[5], -1) {
			w, err := strconv.ParseFloat(b[4], 64)
			if err != nil {
				t.Fatalf("chart %s: bar width %q", m[1], b[4])
			}
			if name := html.UnescapeString(b[2]); !strings.HasPrefix(html.UnescapeString(b[1]), name+": ") && !strings.HasSuffix(name, "…") {
				t.Errorf("chart %s: bar %q titled %q", m[1], name, b[1])
			}
			out[m[1]] = append(out[m[1]], usageBar{Name: html.UnescapeString(b[2]), Figure: html.UnescapeString(b[3]), Width: w})
		}
		if h, _ := strconv.ParseFloat(m[2], 64); h < float64(len(out[m[1]]))*40 {
			t.Errorf("chart %s: %v high for %d bars", m[1], h, len(out[m[1]]))
		}
	}
	return out
}

// checkRowCharts: the page shows a chart per figure with one bar per table row, in the table's order,
// named as the row and showing its figure, the largest 600 long and the others in proportion.
func checkRowCharts(t *testing.T, what, body string, rows []usageFigures, names []string) {
	t.Helper()
	charts := usageCharts(t, body)
	for _, figure := range []string{"videos", "seconds", "spend"} {
		title := charts[figure+" title"]
		if len(title) == 0 || !strings.Contains(title[0].Name, "per "+what) || !strings.Contains(title[0].Figure, "One bar per "+what) {
			t.Errorf("per %s: the %s chart's title and description: %+v", what, figure, title)
		}
		bars := charts[figure]
		if len(bars) != len(rows) {
			t.Fatalf("per %s: the %s chart has %d bars, the table %d rows", what, figure, len(bars), len(rows))
		}
		var most int64
		value := func(r usageFigures) int64 {
			return map[string]int64{"videos": r.Videos, "seconds": r.Seconds, "spend": r.Spent}[figure]
		}
		for _, r := range rows {
			most = max(most, value(r))
		}
		for i, r := range rows {
			b := bars[i]
			want := map[string]string{"videos": fmt.Sprint(r.Videos), "seconds": fmt.Sprintf("%d s", r.Seconds), "spend": money.Micros(r.Spent).USD()}[figure]
			if b.Name != names[i] || b.Figure != want {
				t.Errorf("per %s, %s chart, bar %d: %q %q, want %q %q", what, figure, i, b.Name, b.Figure, names[i], want)
			}
			if w := 600 * float64(value(r)) / float64(most); math.Abs(b.Width-w) > 0.1 && !(value(r) > 0 && b.Width == 2) {
				t.Errorf("per %s, %s chart, bar %d: %v long, want %.1f", what, figure, i, b.Width, w)
			}
		}
	}
}

// csvUsage reads the export: its rows in order (key rows are labelled by name and prefix).
func csvUsage(t *testing.T, p *page) (head []string, rows []usageFigures) {
	t.Helper()
	if p.Status != 200 || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/csv") || !strings.Contains(p.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv: %d %s %s", p.Status, p.Header.Get("Content-Type"), p.Header.Get("Content-Disposition"))
	}
	all, err := csv.NewReader(strings.NewReader(p.Body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	head = all[0]
	first := len(head) - 8 // the label columns, then videos … reserved_usd
	for _, r := range all[1:] {
		n := func(i int) int64 {
			v, err := strconv.ParseInt(r[first+i], 10, 64)
			if err != nil {
				t.Fatalf("csv row %v column %d", r, first+i)
			}
			return v
		}
		spent, err := money.ParseUSD(r[first+6])
		if err != nil || !regexp.MustCompile(`^-?[0-9]+\.[0-9]{6}$`).MatchString(r[first+6]) {
			t.Fatalf("csv spend %q is not dollars with six decimals", r[first+6])
		}
		rows = append(rows, usageFigures{Label: strings.Join(r[:first], " "), Videos: n(0), Completed: n(1), Failed: n(2), Cancelled: n(3), Seconds: n(5), Spent: int64(spent)})
	}
	return head, rows
}

// sameFigures compares the page's rows with the CSV's, in order, figure by figure.
func sameFigures(t *testing.T, what string, pageRows, csvRows []usageFigures) {
	t.Helper()
	if len(pageRows) != len(csvRows) {
		t.Fatalf("%s: the page has %d rows, the CSV %d", what, len(pageRows), len(csvRows))
	}
	for i := range pageRows {
		a, b := pageRows[i], csvRows[i]
		a.Label, b.Label = "", ""
		if a != b {
			t.Errorf("%s row %d: page %+v, CSV %+v (%s / %s)", what, i, a, b, pageRows[i].Label, csvRows[i].Label)
		}
	}
}

func findRow(t *testing.T, rows []usageFigures, label string) usageFigures {
	t.Helper()
	for _, r := range rows {
		if r.Label == label {
			return r
		}
	}
	t.Fatalf("no row %s among %+v", label, rows)
	return usageFigures{}
}

// saveBilling sends the Wallet page's billing details form and expects it saved.
func saveBilling(t *testing.T, b *browser, values url.Values) {
	t.Helper()
	p := b.submit("/console/wallet", "billing_name", values)
	if p.Status != 303 || p.location() != "/console/wallet?notice=billing-saved#billing" {
		t.Fatalf("billing details: %d %s\n%s", p.Status, p.location(), trimPage(p.Body))
	}
}

func amountOf(t *testing.T, s *testkit.Server, id string) int64 {
	t.Helper()
	return testkit.Task(t, s.DB, id).AmountMicros
}

// TestUsagePage: videos created through the API fall on their day in the account's zone — one a minute
// before midnight in Tokyo, two a minute after, all on one UTC day — and per model and per key; the CSV
// export of each query holds exactly the page's numbers; another account sees none of it.
func TestUsagePage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := &movedClock{}
		s := testkit.StartWith(t, dbURL, map[string]string{"TEST_TOPUPS": "1"}, server.Options{Now: clock.Now})
		const email = "usage@example.com"
		b := signUpVerified(t, s, email)
		saveBilling(t, b, url.Values{"time_zone": {"Asia/Tokyo"}})
		addFunds(t, b, "50")
		alpha, beta := createKey(t, b, "alpha"), createKey(t, b, "beta")
		tokyo, _ := time.LoadLocation("Asia/Tokyo")

		// A day three days ahead, in Tokyo: its last minute and the next day's first.
		now := time.Now().In(tokyo)
		day := time.Date(now.Year(), now.Month(), now.Day()+3, 0, 0, 0, 0, tokyo)
		next := day.AddDate(0, 0, 1)
		clock.To(t, next.Add(-time.Minute))
		late := s.CreateVideo(t, alpha, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "late", "seconds": 4})["id"].(string)
		s.WaitStatus(t, alpha, late, 20*time.Second, "completed")
		clock.To(t, next.Add(30*time.Second))
		early := s.CreateVideo(t, beta, map[string]any{"model": "videogen-2.0-480p", "prompt": "early", "seconds": 8})["id"].(string)
		failed := s.CreateVideo(t, alpha, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "[sim:fail] early", "seconds": 4})["id"].(string)
		s.WaitStatus(t, beta, early, 20*time.Second, "completed")
		s.WaitStatus(t, alpha, failed, 20*time.Second, "failed")
		lateCost, earlyCost := amountOf(t, s, late), amountOf(t, s, early)
		if next.Add(-time.Minute).UTC().Format(time.DateOnly) != next.Add(30*time.Second).UTC().Format(time.DateOnly) {
			t.Fatalf("the story needs both videos on one UTC day")
		}

		b = signUpVerifiedAgain(t, s, email)
		query := url.Values{"from": {day.Format(time.DateOnly)}, "to": {next.Format(time.DateOnly)}}
		get := func(group string) (*page, []usageFigures) {
			t.Helper()
			query.Set("group", group)
			p := b.get("/console/usage?" + query.Encode())
			if p.Status != 200 {
				t.Fatalf("usage per %s: %d %s", group, p.Status, trimPage(p.Body))
			}
			rows := pageUsage(t, p.Body)
			head, csvRows := csvUsage(t, b.get("/console/usage.csv?"+query.Encode()))
			if head[len(head)-2] != "spend_usd" {
				t.Fatalf("csv header %v", head)
			}
			sameFigures(t, "per "+group, rows[:len(rows)-1], csvRows) // the page's last row is the total
			return p, rows
		}

		// Per day in Tokyo: the late video on the first day, the two early ones on the next.
		p, rows := get("day")
		p.contains(t, "Asia/Tokyo", "(2 days)", `<svg class="chart"`)
		want := map[string]usageFigures{
			"row-" + day.Format(time.DateOnly):  {Videos: 1, Completed: 1, Seconds: 4, Spent: lateCost},
			"row-" + next.Format(time.DateOnly): {Videos: 2, Completed: 1, Failed: 1, Seconds: 8, Spent: earlyCost},
			"row-total":                         {Videos: 3, Completed: 2, Failed: 1, Seconds: 12, Spent: lateCost + earlyCost},
		}
		for label, w := range want {
			got := findRow(t, rows, label)
			got.Label = ""
			if got != w {
				t.Errorf("per day, %s: %+v, want %+v", label, got, w)
			}
		}
		if len(rows) != 3 {
			t.Errorf("per day: %d rows, want the two days and the total", len(rows))
		}
		// The dashboard's chart counts the same days, in the account's zone, whatever the member's own
		// display zone (UTC here, where the three videos share one day), and says so.
		dash := b.get("/console")
		dash.contains(t, "Days in the account's time zone, Asia/Tokyo",
			"<title>"+day.Format("Jan 2")+": "+money.Micros(lateCost).USD()+"</title>",
			"<title>"+next.Format("Jan 2")+": "+money.Micros(earlyCost).USD()+"</title>")

		p.lacks(t, "hchart")

		// Per model and per key.
		p, rows = get("model")
		checkRowCharts(t, "model", p.Body, rows[:len(rows)-1], []string{rows[0].Label[len("row-model-"):], rows[1].Label[len("row-model-"):]})
		for label, w := range map[string]usageFigures{
			"row-model-videogen-2.0-mini-480p": {Videos: 2, Completed: 1, Failed: 1, Seconds: 4, Spent: lateCost},
			"row-model-videogen-2.0-480p":      {Videos: 1, Completed: 1, Seconds: 8, Spent: earlyCost},
		} {
			if got := findRow(t, rows, label); got.Videos != w.Videos || got.Completed != w.Completed || got.Failed != w.Failed || got.Seconds != w.Seconds || got.Spent != w.Spent {
				t.Errorf("per model, %s: %+v, want %+v", label, got, w)
			}
		}
		var keys []models.APIKey
		s.DB.R.Order("id").Find(&keys)
		p, rows = get("key")
		p.contains(t, "alpha", "beta", keys[0].Prefix)
		keyNames := map[string]string{fmt.Sprintf("row-key-%d", keys[0].ID): "alpha (" + keys[0].Prefix + "…)", fmt.Sprintf("row-key-%d", keys[1].ID): "beta (" + keys[1].Prefix + "…)"}
		checkRowCharts(t, "API key", p.Body, rows[:len(rows)-1], []string{keyNames[rows[0].Label], keyNames[rows[1].Label]})
		for label, w := range map[string]usageFigures{
			fmt.Sprintf("row-key-%d", keys[0].ID): {Videos: 2, Completed: 1, Failed: 1, Seconds: 4, Spent: lateCost},
			fmt.Sprintf("row-key-%d", keys[1].ID): {Videos: 1, Completed: 1, Seconds: 8, Spent: earlyCost},
		} {
			if got := findRow(t, rows, label); got.Videos != w.Videos || got.Completed != w.Completed || got.Failed != w.Failed || got.Seconds != w.Seconds || got.Spent != w.Spent {
				t.Errorf("per key, %s: %+v, want %+v", label, got, w)
			}
		}

		// In UTC the three videos fall on one day: the days are the account's, not fixed.
		saveBilling(t, b, url.Values{"time_zone": {""}})
		query.Set("group", "day")
		utcDay := next.Add(-time.Minute).UTC().Format(time.DateOnly)
		rows = pageUsage(t, b.get("/console/usage?"+query.Encode()).Body)
		if got := findRow(t, rows, "row-"+utcDay); got.Videos != 3 || got.Spent != lateCost+earlyCost {
			t.Errorf("per UTC day: %+v, want all three videos on %s", got, utcDay)
		}

		// Another account sees none of it, on the page or in the export.
		other := signUpVerified(t, s, "other-usage@example.com")
		op := other.get("/console/usage?" + query.Encode())
		op.contains(t, "No videos in this range")
		op.lacks(t, "alpha", keys[0].Prefix)
		_, csvRows := csvUsage(t, other.get("/console/usage.csv?"+query.Encode()))
		for _, r := range csvRows {
			if r.Videos != 0 || r.Spent != 0 {
				t.Errorf("another account's export shows %+v", r)
			}
		}
	})
}

// TestUsageRangeRefused: a range the report cannot cover is a 422 page (or export) that says why beside
// its field; the default range is the last 30 days; a video still running shows what it holds.
func TestUsageRangeRefused(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "ranges@example.com")
		p := b.get("/console/usage")
		p.contains(t, "(30 days)", "No videos in this range", "POST /v1/videos", "No statements yet")
		addFunds(t, b, "10")
		key := createKey(t, b, "waiting")
		s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "waits", "seconds": 4}) // no worker: it stays queued
		p = b.get("/console/usage")
		p.contains(t, `id="running"`, "1 video is still running", "$0.20 reserved")
		if got := findRow(t, pageUsage(t, p.Body), "row-total"); got.Videos != 1 || got.Spent != 0 {
			t.Errorf("total with a running video: %+v", got)
		}
		p.contains(t, "/console/statements/"+time.Now().UTC().Format("2006-01"))
		// One way to choose the grouping (the Per links; the form keeps the one shown), the running notice
		// apart from the cards, the table cards on a phone (table.fit, each figure labelled), and each chart
		// names its maximum where its tallest bar ends.
		p.contains(t, `<input type="hidden" name="group" value="day">`, `aria-current="page">Day</strong>`, `class="notice warn spaced" id="running"`,
			`<table id="usage" class="figures fit">`, `data-label="Videos"`, `data-label="Spend"`, `<th scope="row" class="head" data-fit="what">`,
			`<line class="most" x1="30" y1="10" x2="590" y2="10"></line>`, `<text x="32" y="7">1</text>`)
		p.lacks(t, `<select id="group"`)
		if n := strings.Count(p.Body, `href="/console/usage?`); n != 2 {
			t.Errorf("the page links %d other groupings, want 2 (model, key)", n)
		}
		// The pages are well formed: one heading, labelled fields, tables in their own box.
		for _, path := range []string{"/console/usage", "/console/usage?group=model", "/console/usage?group=key", "/console/usage?from=x",
			"/console/statements/" + time.Now().UTC().Format("2006-01"), "/console/wallet"} {
			checkPage(t, path, b.get(path))
		}

		for _, tc := range []struct {
			name, query, field, message string
		}{
			{"from not a date", "from=yesterday", "from", "is not a date"},
			{"to not in the calendar", "to=2026-02-30", "to", "is not a date"},
			{"to before from", "from=2026-03-10&to=2026-03-09", "to", "on or after the first day"},
			{"367 days", "from=2025-01-01&to=2026-01-02", "to", "at most 366 days"},
			{"before 2000", "from=1999-12-31&to=2000-01-01", "from", "is not a date"},
			{"unknown grouping", "group=week", "group", "Group by day, model or key"},
		} {
			for _, path := range []string{"/console/usage?", "/console/usage.csv?"} {
				p := b.get(path + tc.query)
				if p.Status != 422 || !strings.Contains(p.Body, `id="`+tc.field+`-error"`) || !strings.Contains(p.Body, tc.message) {
					t.Errorf("%s at %s: %d, want 422 with %q beside %s:\n%s", tc.name, path, p.Status, tc.message, tc.field, trimPage(p.Body))
				}
			}
		}
		for query, label := range map[string]string{
			"from=2024-01-01&to=2024-12-31": "(366 days)",
			"from=2026-03-10&to=2026-03-10": "(1 day)",
			"to=2026-03-10":                 "Feb 9 – Mar 10, 2026 (30 days)",
		} {
			if p := b.get("/console/usage?" + query); p.Status != 200 || !strings.Contains(p.Body, label) {
				t.Errorf("%s: %d, want %q", query, p.Status, label)
			}
		}
	})
}

// statementCell reads an amount of a statement's summary by its row id.
func statementCell(t *testing.T, p *page, id string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?s)<tr[^>]* id="` + regexp.QuoteMeta(id) + `"[^>]*>.*?<td class="num"[^>]*>([^<]*)</td>`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatalf("the statement has no line %s:\n%s", id, trimPage(p.Body))
	}
	return parseMoney(t, html.UnescapeString(m[1]))
}

// TestStatement: a month with top-ups, charges of two models, a failed video refunded and adjustments
// has a statement equal to the ledger to the micro-dollar — its opening and closing balances what the
// ledger's last entries before the month and before its end left, each line the sum of its entries —;
// a month's opening is the previous month's closing; the billing details the account entered are on it.
func TestStatement(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := &movedClock{}
		s := testkit.StartWith(t, dbURL, map[string]string{"TEST_TOPUPS": "1"}, server.Options{Now: clock.Now})
		const email = "books@example.com"
		b := signUpVerified(t, s, email)
		saveBilling(t, b, url.Values{"billing_name": {"Kite Films GmbH"}, "billing_address": {"Gartenstraße 5\r\n\r\n10115 Berlin \nGermany"},
			"tax_id": {"DE123456789"}, "time_zone": {"America/New_York"}})
		addFunds(t, b, "20")
		alpha, beta := createKey(t, b, "alpha"), createKey(t, b, "beta")
		var u models.User
		s.DB.R.Where("email = ?", email).Take(&u)
		ny, _ := time.LoadLocation("America/New_York")
		now := time.Now().In(ny)
		m1 := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, ny)
		m2, m3 := m1.AddDate(0, 1, 0), m1.AddDate(0, 2, 0)
		video := func(key, model, prompt string, seconds int, status string) string {
			t.Helper()
			id := s.CreateVideo(t, key, map[string]any{"model": model, "prompt": prompt, "seconds": seconds})["id"].(string)
			s.WaitStatus(t, key, id, 20*time.Second, status)
			return id
		}
		adjust := func(usd int64, reason string) {
			t.Helper()
			if _, err := (billing.Adjustment{AccountID: u.AccountID, Amount: money.Micros(usd), Reason: "ticket 12: " + reason, CustomerNote: reason, By: audit.CLI, At: clock.Now()}).Apply(context.Background(), s.DB); err != nil {
				t.Fatal(err)
			}
		}

		// The first month: a top-up and a charge.
		clock.To(t, m1.AddDate(0, 0, 4).Add(10*time.Hour))
		b = signUpVerifiedAgain(t, s, email)
		addFunds(t, b, "5")
		video(alpha, "videogen-2.0-mini-480p", "first month", 4, "completed")

		// The second: a top-up, charges of two models (the last a minute before the month ends), a failed
		// video refunded, a credit and a debit by support.
		clock.To(t, m2.AddDate(0, 0, 1).Add(9*time.Hour))
		b = signUpVerifiedAgain(t, s, email)
		addFunds(t, b, "7.50")
		mini := video(alpha, "videogen-2.0-mini-480p", "second month", 8, "completed")
		std := video(beta, "videogen-2.0-480p", "second month", 4, "completed")
		failed := video(alpha, "videogen-2.0-mini-480p", "[sim:fail] second month", 4, "failed")
		adjust(1_234_567, "goodwill for a slow render")
		adjust(-500_000, "correction of a duplicate credit")
		clock.To(t, m3.Add(-time.Minute))
		last := video(beta, "videogen-2.0-mini-480p", "the month's last minute", 4, "completed")

		// The third, under way: one more top-up, after the second month's end.
		clock.To(t, m3.AddDate(0, 0, 1))
		b = signUpVerifiedAgain(t, s, email)
		addFunds(t, b, "1")

		// What the ledger says, read directly.
		var entries []models.LedgerEntry
		s.DB.R.Where("account_id = ?", u.AccountID).Order("id").Find(&entries)
		balanceBefore := func(at time.Time) (total, reserved int64) {
			for _, e := range entries {
				if e.CreatedAt.Before(at) {
					total, reserved = e.AvailableAfter+e.ReservedAfter, e.ReservedAfter
				}
			}
			return total, reserved
		}
		sumKind := func(from, to time.Time, kind string) (net int64) {
			for _, e := range entries {
				if e.Kind == kind && !e.CreatedAt.Before(from) && e.CreatedAt.Before(to) {
					net += e.DeltaAvailable + e.DeltaReserved
				}
			}
			return net
		}

		p := b.get("/console/statements/" + m2.Format("2006-01"))
		if p.Status != 200 {
			t.Fatalf("statement: %d %s", p.Status, trimPage(p.Body))
		}
		p.contains(t, "Statement · "+m2.Format("January 2006"), "Kite Films GmbH", "<address>Gartenstraße 5\n10115 Berlin\nGermany</address>", `<span id="tax-id">DE123456789</span>`,
			fmt.Sprintf(`<dd id="account-id">%d</dd>`, u.AccountID), "America/New_York", m2.Format("January 2, 2006")+" to "+m3.AddDate(0, 0, -1).Format("January 2, 2006"),
			`href="/static/print.css" media="print"`)
		open, _ := balanceBefore(m2)
		closing, reservedAtClose := balanceBefore(m3)
		charged := amountOf(t, s, mini) + amountOf(t, s, std) + amountOf(t, s, last)
		for id, want := range map[string]int64{
			"opening":                       open,
			"closing":                       closing,
			"test-topups":                   7_500_000,
			"charges":                       -charged,
			"charge-videogen-2.0-mini-480p": -(amountOf(t, s, mini) + amountOf(t, s, last)),
			"charge-videogen-2.0-480p":      -amountOf(t, s, std),
			"adjustments":                   734_567,
			"card-refunds":                  0,
			"reserved-returned":             -amountOf(t, s, failed),
			"reserved-held":                 charged + amountOf(t, s, failed),
			"topups":                        0,
		} {
			if got := statementCell(t, p, id); got != want {
				t.Errorf("statement line %s: %s, want %s", id, money.Micros(got), money.Micros(want))
			}
		}
		// Each line is the ledger's sum of its kind, and the opening plus the lines is the closing.
		if got, want := statementCell(t, p, "charges"), sumKind(m2, m3, models.KindSettle); got != want {
			t.Errorf("charges %d, the ledger's settlements %d", got, want)
		}
		if got, want := statementCell(t, p, "test-topups")+statementCell(t, p, "adjustments"), sumKind(m2, m3, models.KindTestTopup)+sumKind(m2, m3, models.KindAdjustment); got != want {
			t.Errorf("funds and adjustments %d, the ledger's %d", got, want)
		}
		if open+7_500_000-charged+734_567 != closing {
			t.Errorf("opening %d + lines ≠ closing %d", open, closing)
		}
		if got := parseMoney(t, regexp.MustCompile(`<span id="closing-reserved">([^<]+)</span>`).FindStringSubmatch(p.Body)[1]); got != reservedAtClose {
			t.Errorf("reserved at the closing %d, the ledger's %d", got, reservedAtClose)
		}
		p.contains(t, "Adjustment by support: goodwill for a slow render", "+$1.234567", "−$0.50", "Refunded in full when they failed or were cancelled (1)")
		p.lacks(t, "ticket 12") // the staff's reason stays theirs

		// The months join: each opening is the previous closing.
		first := b.get("/console/statements/" + m1.Format("2006-01"))
		third := b.get("/console/statements/" + m3.Format("2006-01"))
		if got := statementCell(t, first, "closing"); got != open {
			t.Errorf("the first month closes at %d, the second opens at %d", got, open)
		}
		if got := statementCell(t, third, "opening"); got != closing {
			t.Errorf("the second month closes at %d, the third opens at %d", got, closing)
		}
		if got, want := statementCell(t, first, "test-topups"), int64(5_000_000); got != want {
			t.Errorf("the first month's top-ups: %d", got)
		}
		third.contains(t, "This month is not over", "Balance now")
		var acct models.Account
		s.DB.R.Take(&acct, u.AccountID)
		if got := statementCell(t, third, "closing"); got != acct.AvailableMicros+acct.ReservedMicros {
			t.Errorf("the month under way ends at %d, the wallet holds %d", got, acct.AvailableMicros+acct.ReservedMicros)
		}
		// The Usage page links every month with entries.
		usagePage := b.get("/console/usage")
		for _, m := range []time.Time{now, m1, m2, m3} {
			usagePage.contains(t, `href="/console/statements/`+m.Format("2006-01")+`"`)
		}

		// Another account's statement of the same month holds none of this (it was opened in the third).
		other := signUpVerified(t, s, "other-books@example.com")
		if p := other.get("/console/statements/" + m2.Format("2006-01")); p.Status != 404 {
			t.Errorf("another account's statement of a month before it was opened: %d", p.Status)
		}
		op := other.get("/console/statements/" + m3.Format("2006-01"))
		if op.Status != 200 || statementCell(t, op, "closing") != 0 || statementCell(t, op, "charges") != 0 {
			t.Errorf("another account's statement: %d", op.Status)
		}
		op.lacks(t, "Kite Films", "DE123456789")
		op.contains(t, "No billing details yet")
	})
}

// TestStatementMonthRefused: a month that is not one, in the future or before the account was opened has
// no statement: a 404 page that says which months have one.
func TestStatementMonthRefused(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := signUpVerified(t, s, "months@example.com")
	now := time.Now().UTC()
	for _, month := range []string{"2026-13", "2026-00", "abc", "2026-1", "202603", "2026-03-01", "1999-12", "2001-01",
		now.AddDate(0, 1, 0).Format("2006-01"), now.AddDate(1, 0, 0).Format("2006-01")} {
		p := b.get("/console/statements/" + url.PathEscape(month))
		if p.Status != 404 || !strings.Contains(p.Body, "No statement for this month") || !strings.Contains(p.Body, "YYYY-MM") {
			t.Errorf("month %q: %d, want the 404 page", month, p.Status)
		}
	}
	p := b.get("/console/statements/" + now.Format("2006-01"))
	if p.Status != 200 {
		t.Fatalf("this month: %d", p.Status)
	}
	p.contains(t, "This month is not over", "No top-ups, refunds or adjustments this month")
	if statementCell(t, p, "opening") != 0 || statementCell(t, p, "closing") != 0 {
		t.Errorf("a new account's statement is not empty")
	}
}

// TestBillingDetailsForm: the Wallet page's billing details are checked field by field (a 422 page with
// the message beside the field and what was typed kept), and saved ones are shown again.
func TestBillingDetailsForm(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		b := signUpVerified(t, s, "billing@example.com")
		// Every IANA zone is offered, for the account and for a member's own display.
		for _, page := range []string{"/console/wallet", "/console/account"} {
			b.get(page).contains(t, `<option value="Asia/Kathmandu">`, `<option value="Europe/Amsterdam">`, `<option value="America/Argentina/Salta">`)
		}
		for _, tc := range []struct {
			name   string
			values url.Values
			field  string
		}{
			{"name too long", url.Values{"billing_name": {strings.Repeat("N", 201)}}, "billing_name"},
			{"control character in the name", url.Values{"billing_name": {"Kite\x00Films"}}, "billing_name"},
			{"address too long", url.Values{"billing_address": {strings.Repeat("a", 501)}}, "billing_address"},
			{"address of nine lines", url.Values{"billing_address": {strings.Repeat("line\n", 9)}}, "billing_address"},
			{"tax id too long", url.Values{"tax_id": {strings.Repeat("9", 41)}}, "tax_id"},
			{"unknown time zone", url.Values{"time_zone": {"Mars/Olympus"}}, "time_zone"},
		} {
			p := b.submit("/console/wallet", "billing_name", tc.values)
			if p.Posted != "/console/wallet" || p.Status != 422 || !strings.Contains(p.Body, `id="`+tc.field+`-error"`) {
				t.Errorf("%s: posted to %s, %d, want 422 with %s-error:\n%s", tc.name, p.Posted, p.Status, tc.field, trimPage(p.Body))
			}
			if v := tc.values.Get(tc.field); tc.field != "time_zone" && !strings.Contains(tc.name, "control") && !strings.Contains(p.Body, html.EscapeString(v[:min(len(v), 40)])) {
				t.Errorf("%s: what was typed is not shown again", tc.name)
			}
		}
		var acct models.Account
		s.DB.R.Take(&acct)
		if acct.BillingName != "" || acct.BillingAddress != "" || acct.BillingTaxID != "" || acct.TimeZone != "" {
			t.Fatalf("a refused form changed the account: %+v", acct)
		}
		saveBilling(t, b, url.Values{"billing_name": {"  Ada Lovelace "}, "billing_address": {"12 St James's Square\r\nLondon"}, "tax_id": {"GB123456789"},
			"time_zone": {"Europe/London"}})
		s.DB.R.Take(&acct)
		if acct.BillingName != "Ada Lovelace" || acct.BillingAddress != "12 St James's Square\nLondon" || acct.BillingTaxID != "GB123456789" || acct.TimeZone != "Europe/London" {
			t.Fatalf("saved %+v", acct)
		}
		p := b.get("/console/wallet?notice=billing-saved")
		p.contains(t, "Your billing details were saved.", `value="Ada Lovelace"`, "12 St James&#39;s Square\nLondon</textarea>", `<option value="Europe/London" selected>`)
	})
}
