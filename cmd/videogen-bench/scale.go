package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/testkit/seed"
	"videogen/models"
)

// The scale run (`make bench-scale`, engine "scale"): the same requests on a database seeded with a year
// of a customer base and on an empty one, in one run (docs/performance.md, "Figures that hold at a
// million tasks"). Its flags are its own; the load's length and runs are the bench's.
var (
	scaleAccounts = flag.Int("scale-accounts", 10_000, "scale run: accounts seeded")
	scaleTasks    = flag.Int("scale-tasks", 1_000_000, "scale run: tasks seeded, over a year")
	scaleCalls    = flag.Int("scale-calls", 20_000_000, "scale run: call-log rows seeded, over the call log's retention")
	scalePageTime = flag.Duration("scale-page-time", 3*time.Second, "scale run: how long each console page is loaded")
	scaleKeep     = flag.Bool("scale-keep", false, "scale run: keep both databases (to look at plans afterwards; a few GB, drop them by hand)")
)

// scaleCleanup stops the run's servers and drops its databases when it stops early: log.Fatal runs no
// deferred call, and a run that dies must not leave gigabytes behind. Each is safe to call twice.
var scaleCleanup []func()

func scaleFatalf(format string, args ...any) {
	for i := len(scaleCleanup) - 1; i >= 0; i-- {
		scaleCleanup[i]()
	}
	log.Fatalf(format, args...)
}

// scaleWindow is how much of the biggest account's history the empty database is given: enough for
// every page the run opens and for the month it exports, so both databases show the same rows.
const scaleWindow = 32 * 24 * time.Hour

// scaleDB is one of the two databases of the run and what the run needs to know of it.
type scaleDB struct {
	name, url string
	drop      func()
	seeded    *seed.Result
	appURL    string
	stop      []func()
	cookie    string // the biggest account's owner, signed in
	staff     string // a support engineer, signed in with the second factor passed
	// Ids found in the database that both databases share (they are seeded alike).
	accountID               int64
	email, keyPrefix        string
	taskID, deepTask, reqID string
	oldTask                 string // a task of the first months: only in the seeded database
	callCursor, oldCursor   string // call-log cursors, 7 hours back and 80 days back
	dataDir                 string
}

// pageCase is one console or staff page the run opens on both databases.
type pageCase struct {
	Name   string
	Path   func(d *scaleDB) string
	Staff  bool
	Status int
	// Only on the seeded database: the page shows what the empty one does not hold (a task of last year,
	// every user whose address holds a common word), so it has no empty-database figure; its p95 counts.
	SeededOnly bool
}

// pageFigure is one page's load on one database.
type pageFigure struct {
	RPS      float64
	P50, P95 time.Duration
	N, Errs  int
	Rows     int // table rows of the last answer: both databases must show the same page
}

func (b *bench) measureScale(pgURL, out string) {
	now := time.Now().UTC()
	empty := &scaleDB{name: "empty"}
	seeded := &scaleDB{name: "seeded"}
	empty.url, empty.drop = createDatabase(pgURL)
	seeded.url, seeded.drop = createDatabase(pgURL)
	if *scaleKeep {
		log.Printf("scale: the databases are kept: %s (empty) and %s (seeded); drop them when done", empty.url, seeded.url)
	} else {
		scaleCleanup = append(scaleCleanup, empty.drop, seeded.drop)
		defer empty.drop()
		defer seeded.drop()
	}
	for _, d := range []*scaleDB{empty, seeded} {
		cmd := exec.Command(b.videogen, "migrate")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "DATABASE_URL=" + d.url, "DATA_DIR=" + filepath.Join(b.work, "scale-"+d.name), "LOG_LEVEL=warn"}
		if o, err := cmd.CombinedOutput(); err != nil {
			scaleFatalf("videogen migrate: %v\n%s", err, o)
		}
	}
	spec := seed.Spec{Accounts: *scaleAccounts, Tasks: *scaleTasks, Calls: *scaleCalls, Now: now,
		TaskSpan: 365 * 24 * time.Hour, CallSpan: 89 * 24 * time.Hour}
	log.Printf("scale: seeding %d accounts, %d tasks and %d call-log rows", spec.Accounts, spec.Tasks, spec.Calls)
	seeded.seeded = seedDB(seeded.url, spec)
	// The empty database holds the biggest account alone, and of it only the window the pages show.
	part := spec
	part.Only, part.Since = []int{1}, now.Add(-scaleWindow)
	empty.seeded = seedDB(empty.url, part)
	sizes := tableSizes(seeded.url)

	// The product's own check of the money, over the whole seeded database: the seed keeps the invariant,
	// and this is what the hourly check costs at this size.
	audit := auditDB(seeded.url)

	for _, d := range []*scaleDB{empty, seeded} {
		d.prepare(b, now)
		defer d.stopPages()
	}
	// Each case runs on one database, then the other, the first one in turn, so a drift of the machine
	// during the run does not favour either.
	pair := func(i int) []*scaleDB {
		if i%2 == 0 {
			return []*scaleDB{empty, seeded}
		}
		return []*scaleDB{seeded, empty}
	}

	// The console and staff pages, signed in as the biggest account's owner and as a support engineer.
	var pages [][2]pageFigure
	for n, pc := range scaleCases {
		var fig [2]pageFigure
		for _, d := range pair(n) {
			if pc.SeededOnly && d == empty {
				continue
			}
			i := d.index()
			fig[i] = d.page(pc, *scalePageTime)
			log.Printf("scale %s: %s: %.0f/s p50 %s p95 %s (%d rows shown, %d errors)", d.name, pc.Name, fig[i].RPS, ms(fig[i].P50), ms(fig[i].P95), fig[i].Rows, fig[i].Errs)
		}
		if !pc.SeededOnly && fig[0].Rows != fig[1].Rows {
			log.Printf("scale: %s shows %d rows on the empty database, %d on the seeded one", pc.Name, fig[0].Rows, fig[1].Rows)
		}
		pages = append(pages, fig)
		if !pc.SeededOnly {
			b.ratios = append(b.ratios, ratio{Measure: "scale: " + pc.Name, Ours: fig[1].RPS, Limit: fig[0].RPS, Unit: "/s", Target: 0.90})
		}
		b.ratios = append(b.ratios, ratio{Measure: "scale: " + pc.Name + ", p95 on the seeded database", Ours: ms64(fig[1].P95), Limit: 200,
			Unit: "ms", LowerIsBetter: true, Target: 1})
	}

	// A month of the call log as CSV: rows per second.
	var export [2]exportFigure
	for _, d := range []*scaleDB{empty, seeded} {
		i := d.index()
		export[i] = d.export(now)
		log.Printf("scale %s: CSV export of a month: %d rows in %s (%.0f rows/s)", d.name, export[i].Rows, export[i].Took.Round(time.Millisecond), export[i].RowsPerSec())
	}
	b.ratios = append(b.ratios, ratio{Measure: "scale: CSV export of a month of the call log", Ours: export[1].RowsPerSec(), Limit: export[0].RowsPerSec(),
		Unit: "rows/s", Target: 0.90, Note: fmt.Sprintf("GET /console/calls.csv of 30 days of the biggest account: %d rows, the median of 3 downloads", export[1].Rows)})

	empty.stopPages()
	seeded.stopPages()

	// The API last: its creates leave thousands of queued tasks behind (no worker runs them).
	var api [][2]result
	for n, c := range []struct{ name, mode string }{{"GET /v1/videos/{id}", "get"}, {"GET /v1/videos/{id}, poll cache off", "get-uncached"}, {"POST /v1/videos", "post"}} {
		var fig [2]result
		for _, d := range pair(n) {
			fig[d.index()] = d.api(b, c.name, c.mode)
		}
		api = append(api, fig)
		b.ratios = append(b.ratios, ratio{Measure: "scale: " + c.name, Ours: fig[1].RPS, Limit: fig[0].RPS, Unit: "/s", Target: 0.90,
			Note: fmt.Sprintf("on the seeded database (a year of %d accounts: %d tasks, %d call-log rows) against the empty one, same harness, same run", spec.Accounts, spec.Tasks, spec.Calls)})
	}

	if err := writeRegion(out, "bench-scale", scaleReport(spec, seeded.seeded, sizes, audit, api, pages, export, b)); err != nil {
		scaleFatalf("scale: %v", err)
	}
}

// index is the database's place in a pair of figures: 0 the empty one, 1 the seeded one.
func (d *scaleDB) index() int {
	if d.name == "seeded" {
		return 1
	}
	return 0
}

// auditFigure is the ledger audit's run over a database.
type auditFigure struct {
	Problems int
	Took     time.Duration
}

// auditDB runs the product's ledger audit (tasks.Audit, what LEDGER_CHECK_INTERVAL runs) over the database.
func auditDB(dbURL string) auditFigure {
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	defer d.Close()
	start := time.Now()
	problems, err := tasks.Audit(context.Background(), d)
	if err != nil {
		scaleFatalf("scale: ledger audit: %v", err)
	}
	for i, p := range problems {
		if i < 10 {
			log.Printf("scale: ledger audit: %s", p)
		}
	}
	f := auditFigure{Problems: len(problems), Took: time.Since(start)}
	log.Printf("scale: ledger audit of the seeded database: %d problems in %s", f.Problems, f.Took.Round(time.Millisecond))
	return f
}

// seedDB seeds the database at dbURL.
func seedDB(dbURL string, spec seed.Spec) *seed.Result {
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	defer d.Close()
	sqlDB, _ := d.W.DB()
	res, err := seed.Seed(context.Background(), sqlDB, spec, log.Printf)
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	log.Printf("scale: seeded in %s", res.Took.Round(time.Millisecond))
	return res
}

// tableSizes is each big table's rows and bytes on disk, its indexes included.
func tableSizes(dbURL string) []string {
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	defer d.Close()
	var rows []struct {
		Name  string
		Rows  int64
		Bytes int64
	}
	if err := d.R.Raw(`SELECT c.relname AS name, c.reltuples::bigint AS rows, pg_total_relation_size(c.oid) AS bytes FROM pg_class c
		WHERE c.relname IN ('tasks', 'task_events', 'ledger_entries', 'call_logs', 'accounts', 'users', 'api_keys') AND c.relkind = 'r'
			AND c.relnamespace = 'public'::regnamespace ORDER BY pg_total_relation_size(c.oid) DESC`).Scan(&rows).Error; err != nil {
		scaleFatalf("scale: %v", err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("| %s | %d | %.0f MB |", r.Name, r.Rows, float64(r.Bytes)/(1<<20)))
	}
	return out
}

// prepare starts the database's servers and finds what the pages open; it signs in the biggest account's
// owner and a support engineer by writing their sessions, as a sign-in does.
func (d *scaleDB) prepare(b *bench, d0 time.Time) {
	ctx := context.Background()
	conn, err := db.Open(ctx, d.url)
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	defer conn.Close()
	d.accountID = d.seeded.AccountID(1)
	owner := d.seeded.UserID(1)
	one := func(dst any, q string, args ...any) {
		if err := conn.R.Raw(q, args...).Row().Scan(dst); err != nil {
			scaleFatalf("scale %s: %s: %v", d.name, q, err)
		}
	}
	one(&d.email, "SELECT email FROM users WHERE id = ?", owner)
	one(&d.keyPrefix, "SELECT prefix FROM api_keys WHERE account_id = ? ORDER BY id LIMIT 1", d.accountID)
	// Rows of the last days, which both databases hold (the same rows: they are seeded alike).
	ago := func(d time.Duration) time.Time { return d0.Add(-d) }
	one(&d.taskID, "SELECT id FROM tasks WHERE account_id = ? AND created_at < ? ORDER BY created_at DESC, id DESC LIMIT 1", d.accountID, ago(12*time.Hour))
	one(&d.deepTask, "SELECT id FROM tasks WHERE account_id = ? AND created_at < ? ORDER BY created_at DESC, id DESC LIMIT 1", d.accountID, ago(5*24*time.Hour))
	one(&d.reqID, "SELECT request_id FROM call_logs WHERE account_id = ? AND at < ? ORDER BY at DESC, id DESC LIMIT 1", d.accountID, ago(time.Hour))
	var at time.Time
	var id int64
	if err := conn.R.Raw("SELECT at, id FROM call_logs WHERE account_id = ? AND at < ? ORDER BY at DESC, id DESC LIMIT 1", d.accountID, ago(7*time.Hour)).Row().Scan(&at, &id); err != nil {
		scaleFatalf("scale: %v", err)
	}
	d.callCursor = fmt.Sprintf("%d-%d", at.UnixMicro(), id)
	if d.name == "seeded" {
		one(&d.oldTask, "SELECT id FROM tasks WHERE account_id = ? AND created_at < ? ORDER BY created_at DESC, id DESC LIMIT 1", d.accountID, ago(330*24*time.Hour))
		if err := conn.R.Raw("SELECT at, id FROM call_logs WHERE account_id = ? AND at < ? ORDER BY at DESC, id DESC LIMIT 1", d.accountID,
			ago(80*24*time.Hour)).Row().Scan(&at, &id); err != nil {
			scaleFatalf("scale: %v", err)
		}
		d.oldCursor = fmt.Sprintf("%d-%d", at.UnixMicro(), id)
	}
	d.cookie = session(conn, owner, false)
	staff, err := accounts.Create(ctx, conn, accounts.NewUser{Email: "support-bench@example.com", Verified: true})
	if err != nil {
		scaleFatalf("scale: %v", err)
	}
	if err := conn.W.Model(&models.User{}).Where("id = ?", staff.ID).Updates(map[string]any{"role": models.RoleSupport, "totp_enabled_at": time.Now().UTC()}).Error; err != nil {
		scaleFatalf("scale: %v", err)
	}
	d.staff = session(conn, staff.ID, true)

	// The API's servers: one as in production, one without workers and with the poll cache off; the
	// accounts the load is spread over, funded, each with one task to poll.
	// No worker runs on either: what is measured is the request's own path, never a backlog of renders
	// left by the other database's creates; nor does the hourly ledger check (timed apart, above). The
	// pages' server stays up through the pages; the API's are started for each case and stopped after it,
	// so the run never holds more than one server's pool of connections open on the shared PostgreSQL.
	d.dataDir = filepath.Join(b.work, "scale-"+d.name)
	url, _, stop := b.startServer(d.url, d.dataDir, scaleQuiet...)
	d.appURL = url
	d.stop = append(d.stop, stop)
	scaleCleanup = append(scaleCleanup, stop)
	keys := b.fund(d.url)
	var targets []string
	for _, k := range keys {
		req, _ := http.NewRequest("POST", url+"/v1/videos", strings.NewReader(`{"model":"videogen-2.0-mini-480p","prompt":"benchmark"}`))
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			scaleFatalf("scale: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		tid := between(string(body), `"id":"`, `"`)
		if resp.StatusCode != 200 || tid == "" {
			scaleFatalf("scale %s: setup create: %d %s", d.name, resp.StatusCode, body)
		}
		targets = append(targets, k+" "+tid)
	}
	_ = os.WriteFile(filepath.Join(b.work, "scale-"+d.name+"-targets.txt"), []byte(strings.Join(targets, "\n")+"\n"), 0o600)
}

// scaleQuiet is the servers' settings: no worker, no ledger check, no backlog limit in the way.
var scaleQuiet = []string{"WORKERS=false", "LEDGER_CHECK_INTERVAL=0", "MAX_QUEUED_PER_ACCOUNT=100000000", "QUEUE_TIMEOUT=24h"}

// stopPages stops the pages' server.
func (d *scaleDB) stopPages() {
	for _, stop := range d.stop {
		stop()
	}
	d.stop = nil
}

// session starts a console session for a user and returns its cookie header; staff sessions have passed
// the second factor.
func session(conn *db.DB, userID int64, secondFactor bool) string {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := hex.EncodeToString(raw)
	sum := sha256.Sum256([]byte(token))
	now := time.Now().UTC()
	s := models.Session{UserID: userID, TokenHash: hex.EncodeToString(sum[:]), CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(24 * time.Hour)}
	if secondFactor {
		s.SecondFactorAt = &now
	}
	if err := conn.W.Create(&s).Error; err != nil {
		scaleFatalf("scale: %v", err)
	}
	return "vg_session=" + token
}

// api runs one API case with wrk against a server of its own on the database, stopped after it.
func (d *scaleDB) api(b *bench, name, mode string) result {
	targets := filepath.Join(b.work, "scale-"+d.name+"-targets.txt")
	env := scaleQuiet
	if mode == "get-uncached" {
		env, mode = append(append([]string(nil), scaleQuiet...), "POLL_CACHE_TTL=0"), "get"
	}
	url, _, stop := b.startServer(d.url, d.dataDir, env...)
	defer stop()
	return b.median("videogen on PostgreSQL, "+d.name, name, url, mode, targets, "")
}

// scaleCases are the pages opened on both databases: the biggest account's (7.5% of every table), with
// and without filters, first pages and pages further on, and the staff's search and views of it.
var scaleCases = []pageCase{
	{Name: "console dashboard", Path: func(d *scaleDB) string { return "/console" }},
	{Name: "console tasks", Path: func(d *scaleDB) string { return "/console/tasks" }},
	{Name: "console tasks, failed", Path: func(d *scaleDB) string { return "/console/tasks?status=failed" }},
	{Name: "console tasks, one model", Path: func(d *scaleDB) string { return "/console/tasks?model=videogen-2.0-fast-1080p" }},
	{Name: "console tasks, 5 days back", Path: func(d *scaleDB) string { return "/console/tasks?after=" + d.deepTask }},
	{Name: "console tasks, 11 months back", Path: func(d *scaleDB) string { return "/console/tasks?after=" + d.oldTask }, SeededOnly: true},
	{Name: "console task page", Path: func(d *scaleDB) string { return "/console/tasks/" + d.taskID }},
	{Name: "console call log", Path: func(d *scaleDB) string { return "/console/calls" }},
	{Name: "console call log, 5xx", Path: func(d *scaleDB) string { return "/console/calls?class=5xx" }},
	{Name: "console call log, 4xx of one key", Path: func(d *scaleDB) string { return "/console/calls?class=4xx&key=" + d.keyPrefix }},
	{Name: "console call log, path holds /content", Path: func(d *scaleDB) string { return "/console/calls?path=%2Fcontent" }},
	{Name: "console call log, one day", Path: func(d *scaleDB) string {
		day := time.Now().UTC().AddDate(0, 0, -7)
		return "/console/calls?from=" + day.Format("2006-01-02T15:04") + "&to=" + day.Add(24*time.Hour).Format("2006-01-02T15:04")
	}},
	{Name: "console call log, 7 hours back", Path: func(d *scaleDB) string { return "/console/calls?after=" + d.callCursor }},
	{Name: "console call log, 80 days back", Path: func(d *scaleDB) string { return "/console/calls?after=" + d.oldCursor }, SeededOnly: true},
	{Name: "console call log, path of one video", Path: func(d *scaleDB) string { return "/console/calls?path=" + d.taskID }, SeededOnly: true},
	{Name: "console usage, 30 days", Path: func(d *scaleDB) string { return "/console/usage" }},
	{Name: "console usage, a year by model", Path: func(d *scaleDB) string {
		return "/console/usage?group=model&from=" + time.Now().UTC().AddDate(0, 0, -364).Format("2006-01-02")
	}, SeededOnly: true},
	{Name: "console wallet", Path: func(d *scaleDB) string { return "/console/wallet" }},
	{Name: "console keys (each key's spend this month)", Path: func(d *scaleDB) string { return "/console/keys" }},
	{Name: "console statement of last month", Path: func(d *scaleDB) string {
		return "/console/statements/" + time.Now().UTC().AddDate(0, -1, 0).Format("2006-01")
	}, SeededOnly: true},
	{Name: "staff search, an e-mail address", Staff: true, Status: 303, Path: func(d *scaleDB) string { return "/support/search?q=" + url.QueryEscape(d.email) }},
	{Name: "staff search, a request id", Staff: true, Status: 303, Path: func(d *scaleDB) string { return "/support/search?q=" + d.reqID }},
	{Name: "staff search, a video id", Staff: true, Status: 303, Path: func(d *scaleDB) string { return "/support/search?q=" + d.taskID }},
	{Name: "staff search, a key prefix", Staff: true, Status: 303, Path: func(d *scaleDB) string { return "/support/search?q=" + d.keyPrefix }},
	{Name: "staff search, part of many addresses", Staff: true, Path: func(d *scaleDB) string { return "/support/search?q=garcia" }, SeededOnly: true},
	{Name: "staff overview (30 days of every account)", Staff: true, Path: func(d *scaleDB) string { return "/support" }, SeededOnly: true},
	{Name: "staff account page", Staff: true, Path: func(d *scaleDB) string { return fmt.Sprintf("/support/accounts/%d", d.accountID) }},
	{Name: "staff call log, 5xx", Staff: true, Path: func(d *scaleDB) string { return fmt.Sprintf("/support/accounts/%d/calls?class=5xx", d.accountID) }},
	{Name: "staff ledger", Staff: true, Path: func(d *scaleDB) string { return fmt.Sprintf("/support/accounts/%d/ledger", d.accountID) }},
}

// page loads a page from two clients at once for a while and returns its rate and latencies.
func (d *scaleDB) page(pc pageCase, dur time.Duration) pageFigure {
	path := pc.Path(d)
	cookie := d.cookie
	if pc.Staff {
		cookie = d.staff
	}
	want := pc.Status
	if want == 0 {
		want = 200
	}
	client := &http.Client{Timeout: time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	get := func() (int, []byte, time.Duration) {
		req, _ := http.NewRequest("GET", d.appURL+path, nil)
		req.Header.Set("Cookie", cookie)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, time.Since(start)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, body, time.Since(start)
	}
	var last []byte
	for i := 0; i < 3; i++ { // warm-up
		status, body, _ := get()
		if status != want {
			scaleFatalf("scale %s: %s: %d, want %d: %.300s", d.name, path, status, want, body)
		}
		last = body
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	end := time.Now().Add(dur)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				status, _, took := get()
				mu.Lock()
				lat = append(lat, took)
				if status != want {
					errs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	f := pageFigure{N: len(lat), Errs: errs, RPS: float64(len(lat)) / elapsed.Seconds(), Rows: bytes.Count(last, []byte("<tr"))}
	if len(lat) > 0 {
		f.P50, f.P95 = lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*95/100)]
	}
	return f
}

type exportFigure struct {
	Rows int
	Took time.Duration
}

func (e exportFigure) RowsPerSec() float64 {
	if e.Took <= 0 {
		return 0
	}
	return float64(e.Rows) / e.Took.Seconds()
}

// export downloads 30 days of the biggest account's call log as CSV three times and returns the median.
func (d *scaleDB) export(now time.Time) exportFigure {
	from, to := now.Add(-31*24*time.Hour), now.Add(-24*time.Hour)
	path := "/console/calls.csv?from=" + from.Format("2006-01-02T15:04") + "&to=" + to.Format("2006-01-02T15:04")
	var figs []exportFigure
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", d.appURL+path, nil)
		req.Header.Set("Cookie", d.cookie)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			scaleFatalf("scale: %v", err)
		}
		lines, err := countLines(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			scaleFatalf("scale %s: export: %d %v", d.name, resp.StatusCode, err)
		}
		figs = append(figs, exportFigure{Rows: lines - 1, Took: time.Since(start)})
	}
	sort.Slice(figs, func(i, j int) bool { return figs[i].Took < figs[j].Took })
	return figs[1]
}

func countLines(r io.Reader) (int, error) {
	buf := make([]byte, 256<<10)
	n := 0
	for {
		k, err := r.Read(buf)
		n += bytes.Count(buf[:k], []byte("\n"))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleReport is docs/performance.md's region bench-scale.
func scaleReport(spec seed.Spec, res *seed.Result, sizes []string, audit auditFigure, api [][2]result, pages [][2]pageFigure, export [2]exportFigure, b *bench) string {
	var w strings.Builder
	fmt.Fprintf(&w, "## The last run of `make bench-scale`\n\n")
	fmt.Fprintf(&w, "Measured %s. Two PostgreSQL databases, side by side in one run. The seeded one holds a year of %d accounts — %d tasks with their log lines and ledger entries over 365 days, %d call-log rows over the last 89 days (within the call log's 90-day retention) — written by `internal/testkit/seed` with SQL alone, every index in place. The empty one holds only the biggest account, and of it only its last %d days, so every page below shows the same rows on both.\n\n",
		machine(), spec.Accounts, spec.Tasks, spec.Calls, int(scaleWindow.Hours()/24))
	fmt.Fprintf(&w, "Seeding took %s:\n\n| step | rows | time |\n|---|---:|---:|\n", res.Took.Round(time.Second))
	var analyze time.Duration
	for _, s := range res.Steps {
		switch {
		case strings.HasPrefix(s.Name, "vacuum"):
			analyze += s.Took
		case s.Rows > 1:
			fmt.Fprintf(&w, "| %s | %d | %s |\n", s.Name, s.Rows, s.Took.Round(100*time.Millisecond))
		}
	}
	fmt.Fprintf(&w, "| VACUUM ANALYZE | | %s |\n\n| table | rows | on disk, with indexes |\n|---|---:|---:|\n%s\n\n", analyze.Round(100*time.Millisecond), strings.Join(sizes, "\n"))
	fmt.Fprintf(&w, "The ledger audit the product runs on itself (`tasks.Audit`, every `LEDGER_CHECK_INTERVAL`) over the seeded database: %d problems, in %s.\n\n", audit.Problems, audit.Took.Round(100*time.Millisecond))
	fmt.Fprintf(&w, "Pages, signed in as the biggest account's owner (7.5%% of every table: about %d tasks and %d call-log rows on the seeded database) or as a support engineer, two clients loading the page for %s. The servers run no worker (nothing renders in the background) and no ledger check:\n\n",
		spec.Tasks*75/1000, spec.Calls*75/1000, *scalePageTime)
	fmt.Fprintf(&w, "| page | empty: pages/s | p50 | p95 | seeded: pages/s | p50 | p95 | seeded / empty |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for i, p := range pages {
		pc := scaleCases[i]
		if pc.SeededOnly {
			fmt.Fprintf(&w, "| %s (seeded only) | | | | %.0f | %s | %s | |\n", pc.Name, p[1].RPS, ms(p[1].P50), ms(p[1].P95))
			continue
		}
		fmt.Fprintf(&w, "| %s | %.0f | %s | %s | %.0f | %s | %s | %.0f%% |\n", pc.Name, p[0].RPS, ms(p[0].P50), ms(p[0].P95), p[1].RPS, ms(p[1].P50), ms(p[1].P95), 100*p[1].RPS/p[0].RPS)
	}
	fmt.Fprintf(&w, "\nThe CSV export of 30 days of the biggest account's call log: %d rows in %s on the empty database, %d in %s on the seeded one.\n\n",
		export[0].Rows, export[0].Took.Round(10*time.Millisecond), export[1].Rows, export[1].Took.Round(10*time.Millisecond))
	fmt.Fprintf(&w, "The API, driven by `wrk -t1 -c%d` as `make bench` does (median of %d runs of %s; 100 funded accounts, one task each to poll; no worker, so creates queue):\n\n", b.conns, b.runs, b.duration)
	fmt.Fprintf(&w, "| request | empty: requests/s | p99 | seeded: requests/s | p99 | seeded / empty |\n|---|---:|---:|---:|---:|---:|\n")
	for _, p := range api {
		fmt.Fprintf(&w, "| %s | %.0f | %s | %.0f | %s | %.0f%% |\n", p[0].Case, p[0].RPS, ms(p[0].P99), p[1].RPS, ms(p[1].P99), 100*p[1].RPS/p[0].RPS)
	}
	var mine []ratio
	for _, r := range b.ratios {
		if strings.HasPrefix(r.Measure, "scale: ") {
			mine = append(mine, r)
		}
	}
	fmt.Fprintf(&w, "\n### Against the limits\n\n%s", ratiosTable(mine))
	return w.String()
}
