// Package testkit is the test rig: a fresh database per test at the newest schema (a SQLite file, and a
// PostgreSQL database when TEST_DATABASE_URL is set, each a copy of a migrated template), a running server on a free port, funded accounts with keys, and checks of
// the ledger's invariant — so tests read like the story they check.
package testkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver for creating test schemas

	"videogen/billing"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	"videogen/internal/infra/mail"
	"videogen/internal/money"
	"videogen/internal/server"
	"videogen/models"
)

// EachDB runs fn once per database engine under test: SQLite always, PostgreSQL when TEST_DATABASE_URL
// is set. Each run gets a database of its own at the newest schema (a copy of a migrated template:
// template.go), its own server, ports and folders, so the two runs go
// side by side (t.Parallel): a test spends most of its time waiting for the simulator, the worker and
// the database, and the suite fits CI's time only when those waits overlap (docs/decisions.md, "The
// two databases' runs side by side"). Top-level tests still run one after another, so no two tests'
// runs meet. A test that measures the process itself (its heap, its timing) uses EachDBInTurn.
func EachDB(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Helper()
	eachEngine(t, true, SQLiteURL, PostgresURL, fn)
}

// EachEmptyDB is EachDB on databases no migration has touched (EmptySQLiteURL, EmptyPostgresURL): for
// tests of migrating itself.
func EachEmptyDB(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Helper()
	eachEngine(t, true, EmptySQLiteURL, EmptyPostgresURL, fn)
}

// EachDBInTurn is EachDB with the two runs one after the other, for a test whose assertions would be
// disturbed by the other run in the same process: a heap measure, a bound on how long something takes.
func EachDBInTurn(t *testing.T, fn func(t *testing.T, dbURL string)) {
	t.Helper()
	eachEngine(t, false, SQLiteURL, PostgresURL, fn)
}

// eachEngine runs fn on a SQLite database from sqlite, and on a PostgreSQL one from postgres when
// TEST_DATABASE_URL is set; side by side when parallel.
func eachEngine(t *testing.T, parallel bool, sqlite, postgres func(testing.TB) string, fn func(t *testing.T, dbURL string)) {
	t.Helper()
	run := func(name string, dbURL func(testing.TB) string) {
		t.Run(name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			fn(t, dbURL(t))
		})
	}
	run("sqlite", sqlite)
	if os.Getenv("TEST_DATABASE_URL") != "" {
		run("postgres", postgres)
	}
}

// EmptyPostgresURL returns TEST_DATABASE_URL pointed at a new, empty schema, dropped when the test ends:
// for tests of migrating, restoring and refusing to create a database. PostgresURL gives one already
// migrated.
func EmptyPostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Fatal("TEST_DATABASE_URL is not set")
	}
	schema := "t_" + randHex(8)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		_ = admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE")
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Env returns the settings tests run with: fast simulator, tight polling, no rate limit in the way.
// Entries of over replace them.
func Env(t testing.TB, dbURL string, over map[string]string) map[string]string {
	env := map[string]string{
		"DATABASE_URL":      dbURL,
		"DATA_DIR":          t.TempDir(),
		"SIM_DURATION":      "100ms",
		"POLL_INTERVAL_MIN": "10ms",
		"POLL_INTERVAL_MAX": "100ms",
		// A quarter of production's: every idle server polls its four queues, and at 50 ms the polls of
		// the servers a package's tests keep running took a third of its CPU.
		"JOBS_POLL_INTERVAL": "250ms",
		// One secret for every instance of a test, as in production: any instance works a job another
		// queued, and opens what it sealed (an e-mail's body).
		"APP_SECRET":       "testkit-app-secret-of-every-instance-0123456789abcdef",
		"RATE_LIMIT_RPS":   "100000",
		"RATE_LIMIT_BURST": "100000",
		"LOG_LEVEL":        "error",
		"WORKER_ID":        "test-" + randHex(4),
		"SHUTDOWN_TIMEOUT": "10s",
	}
	for k, v := range over {
		env[k] = v
	}
	return env
}

// Server is a videogen instance serving on a free loopback port for one test.
type Server struct {
	*server.Server
	URL   string
	Mails *mail.Recorder // every e-mail the server sent
}

// Start runs a server on dbURL with Env's settings plus over, and stops it when the test ends.
func Start(t testing.TB, dbURL string, over map[string]string) *Server {
	t.Helper()
	cfg, err := config.Load(Env(t, dbURL, over))
	if err != nil {
		t.Fatal(err)
	}
	return StartConfig(t, cfg)
}

// StartWith is Start with server options (an import policy that allows a test's TLS server, a clock, a
// mail sender of the test's own instead of the recorder).
func StartWith(t testing.TB, dbURL string, over map[string]string, opts server.Options) *Server {
	t.Helper()
	cfg, err := config.Load(Env(t, dbURL, over))
	if err != nil {
		t.Fatal(err)
	}
	return StartConfig(t, cfg, opts)
}

// recorders is the mail recorder of each test database: any instance of a database may send an e-mail
// another queued (docs/jobs.md), as instances share one Resend account, so they share one recorder.
var recorders sync.Map // database URL → *mail.Recorder

func recorderOf(databaseURL string) *mail.Recorder {
	r, _ := recorders.LoadOrStore(databaseURL, mail.NewRecorder())
	return r.(*mail.Recorder)
}

// StartConfig runs a server with cfg.
func StartConfig(t testing.TB, cfg *config.Config, opts ...server.Options) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PublicBaseURL == "http://localhost:8080" {
		cfg.PublicBaseURL = "http://" + ln.Addr().String()
	}
	level := slog.LevelError
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	mails := recorderOf(cfg.DatabaseURL)
	opt := server.Options{}
	if len(opts) > 0 {
		opt = opts[0]
	}
	// A test's own sender (one that fails, say) replaces the recorder; Mails then records nothing.
	if opt.Mail == nil {
		opt.Mail = mails
	}
	s, err := server.New(context.Background(), cfg, log, opt)
	if err != nil {
		_ = ln.Close()
		t.Fatalf("start server: %v", err)
	}
	s.Start()
	go func() { _ = s.Serve(ln) }()
	srv := &Server{Server: s, URL: "http://" + ln.Addr().String(), Mails: mails}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		// Whatever the test did, the money and the counters add up at its end. The test's own clean-ups
		// ran first (registered after Start): a test that breaks the invariant on purpose puts it right
		// there.
		CheckLedgerAt(t, cfg.DatabaseURL, "after the server stopped")
	})
	return srv
}

// CheckLedgerAt is CheckLedger on the database at dbURL, opened for the check (the server that used it may
// be gone); when says when the check runs, for the failure's message.
func CheckLedgerAt(t testing.TB, dbURL, when string) {
	t.Helper()
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		t.Errorf("ledger audit %s: open the database: %v", when, err)
		return
	}
	defer d.Close()
	for _, msg := range LedgerProblems(d) {
		t.Errorf("ledger audit %s: %s", when, msg)
	}
}

// Account is a funded test customer.
type Account struct {
	ID    int64
	Email string
	Key   string
}

// NewAccount creates a verified user with an account credited with usd and one API key.
func (s *Server) NewAccount(t testing.TB, usd string) Account {
	t.Helper()
	return NewAccount(t, s.DB, usd)
}

// NewAccount creates a verified, funded account with a key directly in d.
func NewAccount(t testing.TB, d *db.DB, usd string) Account {
	t.Helper()
	ctx := context.Background()
	email := "user-" + randHex(6) + "@example.com"
	u, err := accounts.Create(ctx, d, accounts.NewUser{Email: email, Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	if usd != "" && usd != "0" {
		amt, err := money.ParseUSD(usd)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (billing.Credit{AccountID: u.AccountID, Kind: models.KindTestTopup, Amount: amt, Reason: "test funds", Actor: "testkit"}).Apply(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	secret, _, err := apikeys.Create(ctx, d, u.AccountID, "test", &u.ID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return Account{ID: u.AccountID, Email: email, Key: secret}
}

// Resp is an HTTP answer read whole (tests only).
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as an object; it fails the test if it is not one.
func (r *Resp) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object (status %d): %q", r.Status, truncate(r.Body))
	}
	return m
}

// ErrorCode returns error.code of an error body, or "".
func (r *Resp) ErrorCode() string {
	var m struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &m)
	return m.Error.Code
}

func truncate(b []byte) string {
	if len(b) > 500 {
		return string(b[:500]) + "…"
	}
	return string(b)
}

var client = &http.Client{Timeout: 60 * time.Second}

// Do sends a request. body may be nil, a string/[]byte (sent as is) or any value (sent as JSON). With a
// JSON or string body, Content-Type is application/json unless headers set it. headers are name, value
// pairs.
func (s *Server) Do(t testing.TB, method, path, key string, body any, headers ...string) *Resp {
	t.Helper()
	return Do(t, s.URL, method, path, key, body, headers...)
}

// Do sends a request to base.
func Do(t testing.TB, base, method, path, key string, body any, headers ...string) *Resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	r := &Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	checkOpenAPI(t, req, r)
	return r
}

// CreateVideo posts a create request and requires a 200; it returns the video object.
func (s *Server) CreateVideo(t testing.TB, key string, body map[string]any, headers ...string) map[string]any {
	t.Helper()
	r := s.Do(t, "POST", "/v1/videos", key, body, headers...)
	if r.Status != 200 {
		t.Fatalf("create video: status %d: %s", r.Status, r.Body)
	}
	return r.JSON(t)
}

// WaitStatus polls the task until its status is one of want, and returns it.
func (s *Server) WaitStatus(t testing.TB, key, id string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	// A condition, not a sleep: it ends as soon as the task does. The floor is for the loaded machine —
	// under a full make test (-race, packages side by side on two cores) the simulator's render of one
	// realistic video has taken over 20 s, and a test asking 20 s then failed for nothing but load.
	timeout = max(timeout, minVideoWait)
	var last map[string]any
	Eventually(t, timeout, fmt.Sprintf("task %s reaches %v", id, want), func() bool {
		r := s.Do(t, "GET", "/v1/videos/"+id, key, nil)
		if r.Status != 200 {
			t.Fatalf("poll %s: status %d: %s", id, r.Status, r.Body)
		}
		last = r.JSON(t)
		return slices.Contains(want, fmt.Sprint(last["status"]))
	}, func() string { return fmt.Sprintf("last: %v", last) })
	return last
}

// minVideoWait is the least WaitStatus waits for a task to reach a status.
const minVideoWait = 90 * time.Second

// Eventually asks ok until it holds, and fails the test (t.Fatalf) naming what if it does not within
// timeout. detail, when given, says what was seen last; it is called only on failure. ok runs on the
// test's goroutine, so it may fail the test itself. It asks every 10 ms at first and less often as the
// wait goes on (see poll), so timeouts can be generous: the suite runs on loaded 2-core machines, and a
// wait ends soon after its condition holds.
func Eventually(t testing.TB, timeout time.Duration, what string, ok func() bool, detail ...func() string) {
	t.Helper()
	if poll(timeout, ok) {
		return
	}
	msg := what
	for _, d := range detail {
		msg += "; " + d()
	}
	t.Fatalf("not within %s: %s", timeout, msg)
}

// Bounds of the pause between two asks of a condition.
const (
	pollMin = 10 * time.Millisecond
	pollMax = 250 * time.Millisecond
)

// poll is Eventually's loop, also for the rig's own waits that report an error rather than fail a test:
// it says whether ok held within timeout (asked once more at the end). Between asks it pauses a tenth of
// the time waited so far, from 10 ms to 250 ms: a condition is seen within a tenth of the wait it took,
// and a long wait neither loads the machine nor runs into a server's rate limit (10 requests a second by
// default) with a condition that asks it.
func poll(timeout time.Duration, ok func() bool) bool {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		if ok() {
			return true
		}
		now := time.Now()
		if now.After(deadline) {
			return false
		}
		time.Sleep(min(max(now.Sub(start)/10, pollMin), pollMax, deadline.Sub(now)+time.Millisecond))
	}
}

// Task reads a task row.
func Task(t testing.TB, d *db.DB, id string) models.Task {
	t.Helper()
	var task models.Task
	if err := d.R.Where("id = ?", id).Take(&task).Error; err != nil {
		t.Fatalf("read task %s: %v", id, err)
	}
	return task
}

// Entries returns the ledger entries of a task, oldest first.
func Entries(t testing.TB, d *db.DB, taskID string) []models.LedgerEntry {
	t.Helper()
	var es []models.LedgerEntry
	if err := d.R.Where("task_id = ?", taskID).Order("id").Find(&es).Error; err != nil {
		t.Fatal(err)
	}
	return es
}

// Kinds lists the kinds of entries.
func Kinds(es []models.LedgerEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Kind
	}
	return out
}

// CheckLedger fails the test unless every invariant tasks.Audit checks holds: each account's balances
// equal the sums of its entries (reserved >= 0), every task's entries match its billing state exactly
// once, and the counters the task store keeps (credentials' in_flight, accounts' waiting_tasks) are exact.
func CheckLedger(t testing.TB, d *db.DB) {
	t.Helper()
	for _, msg := range LedgerProblems(d) {
		t.Error(msg)
	}
}

// LedgerProblems returns each violation tasks.Audit finds, as text. It reads one consistent snapshot, so
// it may run while tasks are moving.
func LedgerProblems(d *db.DB) []string {
	problems, err := tasks.Audit(context.Background(), d)
	var out []string
	for _, p := range problems {
		out = append(out, p.String())
	}
	if err != nil {
		out = append(out, err.Error())
	}
	return out
}

// LockedBuffer collects a child process's output, which os/exec copies from its own goroutine, while
// the test reads it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// OpenDB opens the database at dbURL with every migration applied, closed when the test ends: for
// tests of a domain package that need no server.
func OpenDB(tb testing.TB, dbURL string) *db.DB {
	tb.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(ctx); err != nil {
		tb.Fatal(err)
	}
	return d
}
