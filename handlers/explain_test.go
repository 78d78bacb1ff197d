package handlers_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/config"
	"videogen/internal/infra/mail"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/internal/testkit/seed"
	"videogen/models"
)

// statementLog records the SQL the server runs through GORM, each distinct statement once with the
// arguments of its first run, to EXPLAIN afterwards.
type statementLog struct {
	mu    sync.Mutex
	seen  map[string]bool
	stmts []recordedStatement
}

type recordedStatement struct {
	SQL  string
	Vars []any
}

// watch registers the log on every kind of statement of g. It must run before anything else uses g:
// GORM's callbacks are not safe to change while statements run.
func (l *statementLog) watch(t *testing.T, g *gorm.DB) {
	t.Helper()
	rec := func(db *gorm.DB) {
		if db.Statement == nil || db.Statement.SQL.Len() == 0 {
			return
		}
		q := db.Statement.SQL.String()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.seen[q] {
			return
		}
		l.seen[q] = true
		// Copies: a request's strings (its query, its path parameters) share the buffer of the connection,
		// which the next request overwrites.
		vars := make([]any, len(db.Statement.Vars))
		for i, v := range db.Statement.Vars {
			switch x := v.(type) {
			case string:
				vars[i] = strings.Clone(x)
			case *string:
				if x != nil {
					c := strings.Clone(*x)
					vars[i] = &c
				}
			case []byte:
				vars[i] = append([]byte(nil), x...)
			default:
				vars[i] = v
			}
		}
		l.stmts = append(l.stmts, recordedStatement{SQL: q, Vars: vars})
	}
	cb := g.Callback()
	for _, err := range []error{
		cb.Query().After("gorm:query").Register("explain_test:query", rec),
		cb.Row().After("gorm:row").Register("explain_test:row", rec),
		cb.Raw().After("gorm:raw").Register("explain_test:raw", rec),
		cb.Update().After("gorm:update").Register("explain_test:update", rec),
		cb.Delete().After("gorm:delete").Register("explain_test:delete", rec),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (l *statementLog) all() []recordedStatement {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]recordedStatement(nil), l.stmts...)
}

// startWatched is testkit.Start with every statement the server runs recorded from its first.
func startWatched(t *testing.T, dbURL string, over map[string]string) (*testkit.Server, *statementLog) {
	t.Helper()
	cfg, err := config.Load(testkit.Env(t, dbURL, over))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.PublicBaseURL = "http://" + ln.Addr().String()
	mails := mail.NewRecorder()
	srv, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})), server.Options{Mail: mails})
	if err != nil {
		t.Fatal(err)
	}
	l := &statementLog{seen: map[string]bool{}}
	l.watch(t, srv.DB.W) // on PostgreSQL the readers are the same pool
	srv.Start()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		testkit.CheckLedgerAt(t, dbURL, "after the server stopped") // the seeded ledger included
	})
	return &testkit.Server{Server: srv, URL: "http://" + ln.Addr().String(), Mails: mails}, l
}

// bigTables are the tables that grow with use without bound: a plan must reach their rows by an index.
var bigTables = map[string]bool{"tasks": true, "call_logs": true, "ledger_entries": true, "task_events": true}

var (
	seqScanRE = regexp.MustCompile(`Seq Scan on (\w+)`)
	// ownIndexes are statements with an index made for them, which their plan must use: by another index
	// (ledger_entries_settled, the ledger's primary key) they read every account's rows and dropped all
	// but one account's (migration 00023, the dashboard).
	ownIndexes = []struct {
		sql   *regexp.Regexp
		index string
	}{
		{regexp.MustCompile(`account_id = \$1 AND kind = 'settle' AND created_at >=`), "ledger_entries_account_settled"},
		{regexp.MustCompile(`account_id = \$1 AND kind IN \('topup'`), "ledger_entries_account_funded"},
	}
	// keysetRE finds a page after a cursor: its rows come before the cursor's time, ties broken by id.
	keysetRE = regexp.MustCompile(`\b(created_at|at) ([<>]=) \$\d+ AND \(\(`)
)

// TestQueriesUseIndexesAtScale: on a database seeded with a customer base (tens of thousands of tasks and
// call-log rows, ANALYZEd), every statement the server runs while the main pages and API calls are used —
// poll, create (with a key's spend limit), list, the console's tasks, call log, CSV export, wallet, usage
// and statement, the staff search and a tenant's pages, the worker's own — reads tasks, call_logs,
// ledger_entries and task_events through an index: no plan scans one of them whole. PostgreSQL only:
// SQLite plans otherwise, and the figures at size are PostgreSQL's (docs/performance.md). It checks the
// seed first: the ledger audit passes on it, and a partial seed holds the full one's rows (checkSeed).
func TestQueriesUseIndexesAtScale(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set: the plans checked are PostgreSQL's")
	}
	t.Run("the seed", checkSeed)
	dbURL := testkit.PostgresURL(t)
	s, stmts := startWatched(t, dbURL, map[string]string{"TEST_TOPUPS": "1", "MAX_QUEUED_PER_ACCOUNT": "1000",
		"LEDGER_CHECK_INTERVAL": "0"}) // the self-check reads every entry by design: it is the audit, not a request
	ctx := context.Background()

	// Staff first (their own account), then the customer base.
	sup := signInStaff(t, s, "plans-staff@example.com", models.RoleSupport)
	const password = "seeded-password-2031"
	hash, err := accounts.HashPassword(password)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	sqlDB, _ := s.DB.W.DB()
	res, err := seed.Seed(ctx, sqlDB, seed.Spec{Accounts: 300, Tasks: 40000, Calls: 150000, Now: now,
		TaskSpan: 365 * 24 * time.Hour, CallSpan: 89 * 24 * time.Hour, PasswordHash: hash}, nil)
	if err != nil {
		t.Fatal(err)
	}
	acct := res.AccountID(1) // the biggest account
	var owner models.User
	if err := s.DB.R.Take(&owner, res.UserID(1)).Error; err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s)
	if p := b.post("/signin", "/signin", url.Values{"email": {owner.Email}, "password": {password}}); p.Status != 303 {
		t.Fatalf("sign in as the seeded owner: %d %s", p.Status, trimPage(p.Body))
	}
	key := createKey(t, b, "plans")
	// A monthly limit, so a create sums the key's spend in its period.
	if err := s.DB.W.Model(&models.APIKey{}).Where("prefix = ?", key[:11]).Updates(map[string]any{"spend_limit_micros": 1_000_000_000, "limit_period": "month"}).Error; err != nil {
		t.Fatal(err)
	}
	var seeded []models.Task
	if err := s.DB.R.Where("account_id = ?", acct).Order("created_at DESC, id DESC").Limit(300).Find(&seeded).Error; err != nil || len(seeded) < 300 {
		t.Fatalf("seeded tasks of account %d: %d, %v", acct, len(seeded), err)
	}
	var call models.CallLog
	if err := s.DB.R.Where("account_id = ?", acct).Order("at DESC, id DESC").Offset(500).Take(&call).Error; err != nil {
		t.Fatal(err)
	}

	// The API.
	v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "plans"})
	id := v["id"].(string)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/videos/" + seeded[10].ID, 200},
		{"GET", "/v1/videos?limit=20", 200},
		{"GET", "/v1/videos?limit=20&after=" + seeded[150].ID, 200},
		{"GET", "/v1/videos?limit=20&order=asc&after=" + seeded[150].ID, 200},
		{"GET", "/v1/videos/" + seeded[20].ID + "/content", 0},
		{"GET", "/v1/models", 200},
	} {
		if r := s.Do(t, c.method, c.path, key, nil); c.status != 0 && r.Status != c.status {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
	s.WaitStatus(t, key, id, 30*time.Second, "completed") // the worker's claim, submit, poll and settle
	if r := s.Do(t, "DELETE", "/v1/videos/"+id, key, nil); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}

	// The console, as the biggest account's owner.
	day := now.AddDate(0, 0, -7)
	lastMonth := now.AddDate(0, -1, 0).Format("2006-01")
	for _, path := range []string{
		"/console", "/console/tasks", "/console/tasks?status=failed", "/console/tasks?model=videogen-2.0-fast-1080p",
		"/console/tasks?status=in_progress", "/console/tasks?status=queued&model=videogen-2.0-480p", "/console/tasks?status=failed&model=videogen-2.0-1080p",
		"/console/tasks?after=" + seeded[120].ID, "/console/tasks?status=completed&after=" + seeded[200].ID, "/console/tasks/" + seeded[5].ID,
		"/console/calls", "/console/calls?class=5xx", "/console/calls?class=4xx&key=" + url.QueryEscape(key[:11]),
		"/console/calls?path=%2Fcontent", "/console/calls?path=" + seeded[40].ID, "/console/calls?path=nothing-has-this&class=5xx",
		"/console/calls?from=" + day.Format("2006-01-02T15:04") + "&to=" + day.Add(24*time.Hour).Format("2006-01-02T15:04"),
		fmt.Sprintf("/console/calls?after=%d-%d", call.At.UnixMicro(), call.ID),
		"/console/calls.csv?from=" + now.AddDate(0, 0, -30).Format("2006-01-02T15:04"),
		"/console/wallet", "/console/wallet?before=" + fmt.Sprint(lastEntry(t, s, acct)),
		"/console/usage", "/console/usage?group=model&from=" + now.AddDate(0, 0, -300).Format("2006-01-02"), "/console/usage?group=key",
		"/console/usage.csv", "/console/statements/" + lastMonth, "/console/keys", "/console/account", "/console/members", "/console/webhooks",
	} {
		if p := b.get(path); p.Status != 200 {
			t.Fatalf("%s: %d %s", path, p.Status, trimPage(p.Body))
		}
	}

	// The staff: the search, the overview, the tenant's pages.
	tenant := fmt.Sprintf("/support/accounts/%d", acct)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/support", 200},
		{"/support/search?q=" + url.QueryEscape(owner.Email), 303},
		{"/support/search?q=garcia", 200},
		{"/support/search?q=" + key[:11], 303},
		{"/support/search?q=" + seeded[30].ID, 303},
		{"/support/search?q=" + call.RequestID, 303},
		{"/support/search?q=" + fmt.Sprint(acct), 303},
		{"/support/calls/" + call.RequestID, 200},
		{"/support/tasks/" + seeded[30].ID, 0},
		{tenant, 200},
		{tenant + "/tasks?status=failed", 200},
		{tenant + "/tasks/" + seeded[30].ID, 200},
		{tenant + "/calls?class=5xx", 200},
		{tenant + "/calls.csv?class=4xx", 200},
		{tenant + "/ledger", 200},
		{tenant + "/ledger?before=" + fmt.Sprint(lastEntry(t, s, acct)), 200},
	} {
		if p := sup.get(c.path); c.status != 0 && p.Status != c.status {
			t.Fatalf("%s: %d %s", c.path, p.Status, trimPage(p.Body))
		}
	}

	// Every statement that touches a big table, explained with the arguments it ran with.
	var checked int
	var problems []string
	ownSeen := make([]bool, len(ownIndexes))
	for _, st := range stmts.all() {
		verb := strings.ToUpper(strings.Fields(st.SQL)[0])
		if verb != "SELECT" && verb != "WITH" && verb != "UPDATE" && verb != "DELETE" && verb != "INSERT" {
			continue
		}
		touches := false
		for table := range bigTables {
			if regexp.MustCompile(`(?i)\b` + table + `\b`).MatchString(st.SQL) {
				touches = true
			}
		}
		if !touches {
			continue
		}
		rows, err := sqlDB.QueryContext(ctx, "EXPLAIN "+st.SQL, st.Vars...)
		if err != nil {
			problems = append(problems, fmt.Sprintf("EXPLAIN failed (%v):\n%s", err, st.SQL))
			continue
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if f := os.Getenv("PLANS_OUT"); f != "" { // every plan, for reading: PLANS_OUT=/tmp/plans.txt
			fh, _ := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			fmt.Fprintf(fh, "\n==== %s\n%v\n%s\n", st.SQL, st.Vars, strings.Join(plan, "\n"))
			fh.Close()
		}
		checked++
		// A page after a cursor starts its index range at the cursor: its bound is an index condition, not a
		// filter that drops every newer row first.
		if m := keysetRE.FindStringSubmatch(st.SQL); m != nil && !regexp.MustCompile(`Index Cond: .*\b`+m[1]+` `+m[2]+` `).MatchString(strings.Join(plan, "\n")) {
			problems = append(problems, fmt.Sprintf("reads every row before its cursor (%s is no index condition):\n%s\n%s", m[1], st.SQL, strings.Join(plan, "\n")))
		}
		for i, w := range ownIndexes {
			if w.sql.MatchString(st.SQL) {
				ownSeen[i] = true
				if !strings.Contains(strings.Join(plan, "\n"), w.index) {
					problems = append(problems, fmt.Sprintf("does not use %s:\n%s\n%s", w.index, st.SQL, strings.Join(plan, "\n")))
				}
			}
		}
		for _, m := range seqScanRE.FindAllStringSubmatch(strings.Join(plan, "\n"), -1) {
			if bigTables[m[1]] {
				problems = append(problems, fmt.Sprintf("reads %s whole:\n%s\n%s", m[1], st.SQL, strings.Join(plan, "\n")))
				break
			}
		}
	}
	for i, seen := range ownSeen {
		if !seen {
			t.Errorf("no statement for %s was recorded: the pages above no longer run it, or its SQL changed", ownIndexes[i].index)
		}
	}
	if checked < 40 {
		t.Errorf("only %d statements on the big tables were recorded: the log missed the server's statements", checked)
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("%d statements on tasks, call_logs, ledger_entries and task_events explained", checked)
}

// lastEntry is an id in the middle of an account's ledger, for a page further on.
func lastEntry(t *testing.T, s *testkit.Server, accountID int64) int64 {
	t.Helper()
	var ids []int64
	if err := s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ?", accountID).Order("id DESC").Limit(200).Pluck("id", &ids).Error; err != nil || len(ids) < 200 {
		t.Fatalf("ledger of %d: %d entries, %v", accountID, len(ids), err)
	}
	return ids[len(ids)-1]
}

// checkSeed: a seeded database passes the ledger audit the product runs on itself (balances are the sums
// of the entries, each task has its reserve and its settle or release), its accounts are of very
// different sizes, and a seed restricted to two accounts and a recent window holds exactly the rows the
// full seed has there — what the scale benchmark's empty database relies on.
func checkSeed(t *testing.T) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	spec := seed.Spec{Accounts: 200, Tasks: 20000, Calls: 60000, Now: now, TaskSpan: 365 * 24 * time.Hour, CallSpan: 89 * 24 * time.Hour}
	full := testkit.OpenDB(t, testkit.PostgresURL(t))
	sqlDB, _ := full.W.DB()
	res, err := seed.Seed(ctx, sqlDB, spec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int64{"accounts": 200, "users": 200, "tasks": 20000, "call_logs": 60000, "topups": 200, "ledger_entries": 40200} {
		var n int64
		if err := full.R.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	problems, err := tasks.Audit(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("ledger audit: %s", p)
	}
	// A few accounts much bigger than the rest.
	var sizes []int64
	if err := full.R.Raw("SELECT COUNT(*) FROM tasks GROUP BY account_id ORDER BY COUNT(*) DESC").Scan(&sizes).Error; err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 150 || sizes[0] < 1000 || sizes[0] < 20*sizes[len(sizes)/2] {
		t.Errorf("accounts' sizes are not skewed: biggest %d, median %d, %d accounts with tasks", sizes[0], sizes[len(sizes)/2], len(sizes))
	}
	var biggest int64
	if err := full.R.Raw("SELECT account_id FROM tasks GROUP BY account_id ORDER BY COUNT(*) DESC LIMIT 1").Scan(&biggest).Error; err != nil {
		t.Fatal(err)
	}
	if biggest != res.AccountID(1) {
		t.Errorf("the biggest account is %d, not rank 1's %d", biggest, res.AccountID(1))
	}
	// Every call names its account's key, and a task of its account where it names one.
	var strays int64
	if err := full.R.Raw(`SELECT COUNT(*) FROM call_logs c LEFT JOIN api_keys k ON k.prefix = c.key_prefix LEFT JOIN tasks t ON t.id = c.task_id
		WHERE c.account_id IS NOT NULL AND (k.account_id IS DISTINCT FROM c.account_id OR (c.task_id <> '' AND t.account_id IS DISTINCT FROM c.account_id))`).Scan(&strays).Error; err != nil {
		t.Fatal(err)
	}
	if strays != 0 {
		t.Errorf("%d calls name another account's key or task", strays)
	}

	// The same account and window, alone.
	since := now.Add(-20 * 24 * time.Hour)
	spec.Only, spec.Since = []int{1, 7}, since
	part := testkit.OpenDB(t, testkit.PostgresURL(t))
	partSQL, _ := part.W.DB()
	if _, err := seed.Seed(ctx, partSQL, spec, t.Logf); err != nil {
		t.Fatal(err)
	}
	if problems, err := tasks.Audit(ctx, part); err != nil || len(problems) > 0 {
		t.Errorf("ledger audit of the partial seed: %v %v", problems, err)
	}
	for _, q := range []struct{ name, sql string }{
		{"tasks", "SELECT id || status || amount_micros || created_at::text FROM tasks WHERE account_id IN (?, ?) AND created_at >= ? ORDER BY 1"},
		{"calls", "SELECT request_id || path || status || at::text || key_prefix FROM call_logs WHERE account_id IN (?, ?) AND at >= ? ORDER BY 1"},
	} {
		var a, b []string
		if err := full.R.Raw(q.sql, res.AccountID(1), res.AccountID(7), since).Scan(&a).Error; err != nil {
			t.Fatal(err)
		}
		if err := part.R.Raw(q.sql, res.AccountID(1), res.AccountID(7), since).Scan(&b).Error; err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s since %s: %d in the full seed, %d in the partial one", q.name, since, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s differ: %q in the full seed, %q in the partial one", q.name, a[i], b[i])
			}
		}
	}
	var others int64
	if err := part.R.Raw("SELECT COUNT(*) FROM tasks WHERE account_id NOT IN (?, ?) OR created_at < ?", res.AccountID(1), res.AccountID(7), since).Scan(&others).Error; err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("the partial seed wrote %d tasks outside its accounts and window", others)
	}
}
