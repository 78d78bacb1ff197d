package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// bin is the videogen binary under test, built once (with the race detector) by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "videogen-bin")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "videogen")
	// As make test builds the tests: the race detector off for the pure-Go SQLite and argon2 only (see the
	// Makefile's RACE_GCFLAGS).
	build := exec.Command("go", "build", "-race", "-gcflags=modernc.org/...=-d=checkptr=0 -race=false",
		"-gcflags=golang.org/x/crypto/argon2=-race=false", "-o", bin, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build videogen:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// environ is a minimal environment: nothing of the developer's shell leaks into the product's settings.
func environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// run executes a videogen command and returns stdout, stderr and the exit code.
func run(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, environ(env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// process is a running `videogen serve`.
type process struct {
	cmd    *exec.Cmd
	url    string
	stderr *testkit.LockedBuffer
	exited chan struct{} // closed when the process has exited; err is then set
	err    error
}

// databaseOf is the database `videogen serve` in dir uses with env: DATABASE_URL, else the SQLite file
// under DATA_DIR.
func databaseOf(dir string, env map[string]string) string {
	if u := env["DATABASE_URL"]; u != "" {
		return u
	}
	data := env["DATA_DIR"]
	if data == "" {
		data = "data"
	}
	if !filepath.IsAbs(data) {
		data = filepath.Join(dir, data)
	}
	return filepath.Join(data, "videogen.db")
}

// serve starts `videogen serve` in dir on env["ADDR"], or on a free loopback port when that is unset
// (a test sets it when PUBLIC_BASE_URL must name the server). Unless env names SHUTDOWN_DRAIN_DELAY
// (empty for its default), the server stops without a drain: no proxy watches a test's server, and the
// 5 s would be spent at every SIGTERM.
func serve(t *testing.T, dir string, env map[string]string) *process {
	t.Helper()
	addr := env["ADDR"]
	if addr == "" {
		addr = testkit.FreeAddr(t)
		env["ADDR"] = addr
	}
	if _, ok := env["SHUTDOWN_DRAIN_DELAY"]; !ok {
		env["SHUTDOWN_DRAIN_DELAY"] = "0"
	}
	// A server on every interface (":port", "0.0.0.0:port") is reached, by the test, on loopback.
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = dir, environ(env)
	errb := &testkit.LockedBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, url: "http://" + addr, stderr: errb, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		// Killed or stopped, the books it leaves add up, as after every test that starts a server.
		testkit.CheckLedgerAt(t, databaseOf(dir, env), "after videogen serve stopped")
	})
	testkit.Eventually(t, 30*time.Second, "videogen ready", func() bool {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("videogen exited at start: %v\n%s", p.err, errb.String())
		default:
		}
		return false
	}, func() string { return errb.String() })
	return p
}

// TestFreshStart: with nothing configured the binary creates its SQLite file and secret under data/,
// migrates, and serves; `migrate` and `serve --help` work.
func TestFreshStart(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, map[string]string{})
	if r := testkit.Do(t, p.url, "GET", "/healthz", "", nil); r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	for _, f := range []string{"data/videogen.db", "data/app_secret", "data/sim/credentials"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if strings.HasSuffix(f, "secret") && st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	out, _, code := run(t, dir, map[string]string{}, "migrate")
	if code != 0 || !strings.Contains(out, "applied 0 migration(s)") {
		t.Fatalf("migrate: %d %q", code, out)
	}
	out, _, code = run(t, dir, map[string]string{}, "serve", "--help")
	for _, v := range []string{"ADDR", "DATABASE_URL", "PUBLIC_BASE_URL", "APP_SECRET", "SIM_DURATION", "RATE_LIMIT_RPS", "REDIS_URL"} {
		if code != 0 || !strings.Contains(out, v) {
			t.Fatalf("serve --help lacks %s: %q", v, out)
		}
	}
	// Production refuses unsafe settings and says which.
	_, stderr, code := run(t, dir, map[string]string{"APP_ENV": "production", "ADDR": testkit.FreeAddr(t)}, "serve")
	if code == 0 || !strings.Contains(stderr, "RESEND_API_KEY") || !strings.Contains(stderr, "APP_SECRET") || !strings.Contains(stderr, "https") {
		t.Fatalf("production with defaults: exit %d %q", code, stderr)
	}
}

func TestCLI(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL, "SIM_DURATION": "10m"} // the task stays reserved while the balances are read
		out, stderr, code := run(t, dir, env, "accounts", "create", "--email", "Ada@Example.com", "--password", "correct horse battery", "--role", "admin")
		if code != 0 || !strings.Contains(out, "admin user ada@example.com, owner of account") || strings.Contains(out, "/password/reset") {
			t.Fatalf("accounts create: %d %q %q (with --password, no set-password link)", code, out, stderr)
		}
		// The user made owns the account (docs/members.md).
		if out, _, code := run(t, dir, env, "members", "list", "--email", "ada@example.com"); code != 0 ||
			!regexp.MustCompile(`(?m)^ada@example\.com\s+owner\s+member\s`).MatchString(out) {
			t.Fatalf("members list: %d %q", code, out)
		}
		key, stderr, code := run(t, dir, env, "keys", "create", "--email", "ada@example.com", "--name", "ci")
		key = strings.TrimSpace(key)
		if code != 0 || !strings.HasPrefix(key, "vg_") || strings.Contains(key, "\n") || !strings.Contains(stderr, key[:11]) {
			t.Fatalf("keys create printed %q (stderr %q): stdout must be the secret alone", key, stderr)
		}
		out, _, code = run(t, dir, env, "wallet", "credit", "--email", "ada@example.com", "--usd", "25.00", "--reason", "welcome credit")
		if code != 0 || !strings.Contains(out, "available 25.000000 USD") {
			t.Fatalf("wallet credit: %d %q", code, out)
		}

		p := serve(t, dir, env)
		r := testkit.Do(t, p.url, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-720p", "prompt": "cli user's first video"})
		if r.Status != 200 {
			t.Fatalf("create with the CLI's key: %d %s", r.Status, r.Body)
		}
		out, _, code = run(t, dir, env, "wallet", "credit", "--email", "ada@example.com", "--usd", "-0.50", "--reason", "goodwill correction")
		if code != 0 || !strings.Contains(out, "available 23.300000 USD, reserved 1.200000 USD") {
			t.Fatalf("debit: %d %q", code, out)
		}
		out, _, code = run(t, dir, env, "wallet", "balance", "--email", "ada@example.com")
		if code != 0 || !strings.Contains(out, "available 23.300000 USD, reserved 1.200000 USD") {
			t.Fatalf("balance: %d %q", code, out)
		}
		out, _, code = run(t, dir, env, "keys", "revoke", "--prefix", key[:11])
		if code != 0 || !strings.Contains(out, "revoked "+key[:11]) {
			t.Fatalf("revoke: %d %q", code, out)
		}
		if out, _, code = run(t, dir, env, "keys", "revoke", "--prefix", key[:11]); code != 0 || !strings.Contains(out, "already revoked") {
			t.Fatalf("second revoke: %d %q", code, out)
		}
		testkit.Eventually(t, 5*time.Second, "the running server refuses a key revoked from the CLI", func() bool {
			return testkit.Do(t, p.url, "GET", "/v1/models", key, nil).Status == 401
		})

		// The ledger has the adjustments with their reasons and actor.
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var adj []models.LedgerEntry
		d.R.Where("kind = ?", models.KindAdjustment).Order("id").Find(&adj)
		if len(adj) != 2 || adj[0].Reason != "welcome credit" || adj[1].DeltaAvailable != -500_000 || !strings.HasPrefix(adj[0].Actor, "cli") {
			t.Fatalf("adjustments %+v", adj)
		}

		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"accounts", "create", "--email", "ada@example.com"}, "already exists"},
			{[]string{"accounts", "create", "--email", "not-an-email"}, "not an e-mail address"},
			{[]string{"accounts", "create", "--email", "b@example.com", "--role", "root"}, "role must be"},
			{[]string{"accounts", "create", "--email", "c@example.com", "--password", "short"}, "at least 10"},
			{[]string{"accounts", "create"}, "email"},
			{[]string{"keys", "create", "--email", "nobody@example.com"}, "no user"},
			{[]string{"members", "list", "--email", "nobody@example.com"}, "no user"},
			{[]string{"keys", "revoke", "--prefix", "vg_nothing"}, "no api key"},
			{[]string{"wallet", "credit", "--email", "ada@example.com", "--usd", "ten", "--reason", "x"}, "invalid amount"},
			{[]string{"wallet", "credit", "--email", "ada@example.com", "--usd", "5", "--reason", " "}, "reason"},
			{[]string{"wallet", "credit", "--email", "ada@example.com", "--usd", "0", "--reason", "x"}, "zero"},
			{[]string{"nonsense"}, "unknown command"},
		} {
			out, stderr, code := run(t, dir, env, tc.args...)
			if code == 0 || out != "" || !strings.Contains(strings.ToLower(stderr), tc.want) {
				t.Errorf("%v: exit %d stdout %q stderr %q, want non-zero exit and %q on stderr", tc.args, code, out, stderr, tc.want)
			}
		}
	})
}

// TestCrashRecovery kills the server with SIGKILL while tasks are in every stage, restarts it, and shows
// every task still ends exactly once with its billing right and one upstream task each.
func TestCrashRecovery(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{
			"DATABASE_URL": dbURL, "SIM_DURATION": "1500ms", "SIM_CONCURRENCY": "3", "POLL_INTERVAL_MIN": "50ms",
			"POLL_INTERVAL_MAX": "200ms", "LEASE_DURATION": "1s", "RATE_LIMIT_RPS": "1000", "RATE_LIMIT_BURST": "1000",
		}
		_, _, code := run(t, dir, env, "accounts", "create", "--email", "crash@example.com")
		key, _, code2 := run(t, dir, env, "keys", "create", "--email", "crash@example.com")
		_, _, code3 := run(t, dir, env, "wallet", "credit", "--email", "crash@example.com", "--usd", "100", "--reason", "test")
		if code+code2+code3 != 0 {
			t.Fatal("setup failed")
		}
		key = strings.TrimSpace(key)
		p := serve(t, dir, env)
		prompts := []string{"plain", "[sim:fail]", "[sim:5xx-once]", "[sim:reject]"}
		var ids []string
		for i := 0; i < 16; i++ {
			r := testkit.Do(t, p.url, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("crash %d %s", i, prompts[i%4])})
			if r.Status != 200 {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
			ids = append(ids, r.JSON(t)["id"].(string))
		}
		// The crash comes once some tasks are with the simulator, most still waiting for a slot.
		watch, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "some tasks sent to the simulator", func() bool {
			var sent int64
			watch.R.Model(&models.Task{}).Where("upstream_task_id IS NOT NULL").Count(&sent)
			return sent > 0
		})
		_ = watch.Close()
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited

		p2 := serve(t, dir, env)
		for _, id := range ids {
			var v map[string]any
			testkit.Eventually(t, 90*time.Second, "task "+id+" ends after the restart", func() bool {
				v = testkit.Do(t, p2.url, "GET", "/v1/videos/"+id, key, nil).JSON(t)
				return v["status"] == "completed" || v["status"] == "failed"
			}, func() string { return fmt.Sprintf("stuck at %v\n%s", v["status"], p2.stderr.String()) })
		}
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		testkit.CheckLedger(t, d)
		perKey := map[string]int{}
		var simDir = filepath.Join(dir, "data", "sim")
		up, err := sim.New(sim.Config{Dir: simDir, Duration: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range up.Tasks() {
			perKey[st.IdemKey]++
		}
		for i, id := range ids {
			task := testkit.Task(t, d, id)
			wantStatus := map[int]string{0: "completed", 1: "failed", 2: "completed", 3: "failed"}[i%4]
			if task.Status != wantStatus {
				t.Errorf("task %d (%s): %s, want %s", i, prompts[i%4], task.Status, wantStatus)
			}
			if i%4 == 3 {
				continue // refused upstream: no upstream task
			}
			if task.UpstreamKey == nil || perKey[*task.UpstreamKey] != 1 {
				t.Errorf("task %d has %d upstream tasks", i, perKey[deref(task.UpstreamKey)])
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestGracefulShutdown sends SIGTERM under load: the process exits cleanly, every answered request has
// its call-log row, and no task is left leased.
func TestGracefulShutdown(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL, "SIM_DURATION": "300ms", "POLL_INTERVAL_MIN": "20ms", "RATE_LIMIT_RPS": "1000", "RATE_LIMIT_BURST": "1000"}
		run(t, dir, env, "accounts", "create", "--email", "term@example.com")
		key, _, _ := run(t, dir, env, "keys", "create", "--email", "term@example.com")
		run(t, dir, env, "wallet", "credit", "--email", "term@example.com", "--usd", "50", "--reason", "test")
		key = strings.TrimSpace(key)
		p := serve(t, dir, env)
		answered := 0
		for i := 0; i < 40; i++ {
			var r *testkit.Resp
			if i%4 == 0 {
				r = testkit.Do(t, p.url, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("term %d", i)})
			} else {
				r = testkit.Do(t, p.url, "GET", "/v1/models", key, nil)
			}
			if r.Status == 200 {
				answered++
			}
		}
		// Requests in flight when SIGTERM arrives are answered and logged; later ones are refused at the door.
		var mu sync.Mutex
		var wg sync.WaitGroup
		inFlightAnswered := 0
		for i := 0; i < 30; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				body := strings.NewReader(fmt.Sprintf(`{"model":"videogen-2.0-mini-480p","prompt":"late %d"}`, i))
				req, _ := http.NewRequest("POST", p.url+"/v1/videos", body)
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // refused: the listener was already closed
				}
				_, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				defer mu.Unlock()
				if rerr != nil || resp.StatusCode >= 500 {
					t.Errorf("an accepted request was cut off by the shutdown: %d %v", resp.StatusCode, rerr)
				}
				inFlightAnswered++
			}(i)
		}
		// A moment for some of them to reach the server: how many does not matter (it is logged), only
		// that none of those it took in is cut off.
		time.Sleep(15 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		t.Logf("%d of 30 concurrent requests were answered around SIGTERM", inFlightAnswered)
		answered += inFlightAnswered
		select {
		case <-p.exited:
			if p.err != nil {
				t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no exit 30 s after SIGTERM")
		}
		if !strings.Contains(p.stderr.String(), "stopped") {
			t.Fatalf("no orderly stop in the log:\n%s", p.stderr.String())
		}
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var rows, leased int64
		d.R.Model(&models.CallLog{}).Count(&rows)
		d.R.Model(&models.Task{}).Where("lease_owner IS NOT NULL").Count(&leased)
		if answered < 40 || rows != int64(answered) {
			t.Fatalf("%d requests answered, %d call-log rows written", answered, rows)
		}
		if leased != 0 {
			t.Fatalf("%d tasks left leased after a graceful stop", leased)
		}
		testkit.CheckLedger(t, d)
	})
}

// TestStandaloneSimulator runs `videogen upstream-sim` as its own process and points `videogen serve` at
// it as an external upstream: the HTTP adapter works end to end, and the credential stays in the
// environment, never in the database.
func TestStandaloneSimulator(t *testing.T) {
	dir := t.TempDir()
	simAddr := testkit.FreeAddr(t)
	simCmd := exec.Command(bin, "upstream-sim", "--addr", simAddr, "--keys", "up-key-1,up-key-2")
	simCmd.Dir, simCmd.Env = dir, environ(map[string]string{"SIM_DURATION": "300ms", "SIM_DATA_DIR": filepath.Join(dir, "upstream")})
	simErr := &testkit.LockedBuffer{}
	simCmd.Stderr = simErr
	if err := simCmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = simCmd.Process.Kill(); _ = simCmd.Wait() })

	env := map[string]string{"UPSTREAM_BASE_URL": "http://" + simAddr, "UPSTREAM_API_KEYS": "up-key-1,up-key-2", "POLL_INTERVAL_MIN": "50ms"}
	run(t, dir, env, "accounts", "create", "--email", "ext@example.com")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "ext@example.com")
	run(t, dir, env, "wallet", "credit", "--email", "ext@example.com", "--usd", "5", "--reason", "test")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	id := testkit.Do(t, p.url, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "through the wire"}).JSON(t)["id"].(string)
	var v map[string]any
	detail := func() string {
		return fmt.Sprintf("task %v\nserver: %s\nsimulator: %s", v, p.stderr.String(), simErr.String())
	}
	testkit.Eventually(t, 30*time.Second, "the task completes", func() bool {
		v = testkit.Do(t, p.url, "GET", "/v1/videos/"+id, key, nil).JSON(t)
		if v["status"] == "failed" {
			t.Fatal(detail())
		}
		return v["status"] == "completed"
	}, detail)
	if r := testkit.Do(t, p.url, "GET", "/v1/videos/"+id+"/content", key, nil); r.Status != 200 || len(r.Body) < 1000 {
		t.Fatalf("download: %d, %d bytes", r.Status, len(r.Body))
	}
	entries, err := os.ReadDir(filepath.Join(dir, "upstream", "tasks"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("the standalone simulator holds %d tasks (%v), want 1", len(entries), err)
	}
	d, err := db.Open(context.Background(), filepath.Join(dir, "data", "videogen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var creds []models.UpstreamCredential
	d.R.Find(&creds)
	if len(creds) != 2 {
		t.Fatalf("%d credentials in the database, want 2", len(creds))
	}
	for _, c := range creds {
		if strings.Contains(c.ID+c.Label, "up-key") {
			t.Fatalf("a credential secret reached the database: %+v", c)
		}
	}
}

// signUpThroughForm signs up with the console's form on a running binary, as a browser would.
func signUpThroughForm(t *testing.T, base, email string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(base + "/signup")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no sign-up form: %s", body)
	}
	resp, err = c.PostForm(base+"/signup", url.Values{"_csrf": {html.UnescapeString(string(m[1]))}, "email": {email}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Check your inbox") {
		t.Fatalf("sign-up: %d", resp.StatusCode)
	}
}

// TestEmailsPrintedWithoutResend: with RESEND_API_KEY unset the verification e-mail — subject, text and
// link — goes to the server log, and the link works.
func TestEmailsPrintedWithoutResend(t *testing.T) {
	dir := t.TempDir()
	p := serve(t, dir, map[string]string{})
	signUpThroughForm(t, p.url, "printed@example.com")
	link := regexp.MustCompile(`http://localhost:8080/verify\?token=[A-Za-z0-9]+`)
	testkit.Eventually(t, 10*time.Second, "a verification link in the log", func() bool { return link.MatchString(p.stderr.String()) },
		func() string { return p.stderr.String() })
	logged := p.stderr.String()
	if !strings.Contains(logged, "printed@example.com") || !strings.Contains(logged, "Confirm your e-mail address for videogen") {
		t.Fatalf("the logged e-mail lacks its recipient or subject:\n%s", logged)
	}
	// Open the link and press its button, as a person does.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	target := strings.Replace(link.FindString(logged), "http://localhost:8080", p.url, 1)
	resp, err := c.Get(target)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(body)
	if m == nil || !strings.Contains(string(body), "Confirm my e-mail address") {
		t.Fatalf("the logged link does not open the confirmation: %d", resp.StatusCode)
	}
	resp, err = c.PostForm(p.url+"/verify", url.Values{"_csrf": {html.UnescapeString(string(m[1]))}, "token": {target[strings.Index(target, "token=")+6:]}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Your e-mail address is confirmed") {
		t.Fatalf("the logged link does not verify: %d", resp.StatusCode)
	}
}

// TestEmailsThroughResend: with RESEND_API_KEY (and RESEND_API_BASE for the test) the server sends the
// verification e-mail with the real Resend client, as Resend's API expects it.
func TestEmailsThroughResend(t *testing.T) {
	type sent struct {
		Auth, Idem, ContentType, Path string
		Body                          map[string]any
	}
	got := make(chan sent, 4)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- sent{r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), r.Method + " " + r.URL.Path, body}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"4ef9a417-02e9-4d39-ad75-9611e0fcc33c"}`))
	}))
	defer fake.Close()
	dir := t.TempDir()
	p := serve(t, dir, map[string]string{"RESEND_API_KEY": "re_test_key_123", "RESEND_API_BASE": fake.URL, "MAIL_FROM": "videogen <hello@videogen.example>"})
	signUpThroughForm(t, p.url, "resend@example.com")
	var s sent
	select {
	case s = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the Resend API")
	}
	to, _ := s.Body["to"].([]any)
	if s.Path != "POST /emails" || s.Auth != "Bearer re_test_key_123" || !strings.HasPrefix(s.ContentType, "application/json") ||
		!strings.HasPrefix(s.Idem, "verify/") || s.Body["from"] != "videogen <hello@videogen.example>" || len(to) != 1 || to[0] != "resend@example.com" ||
		!strings.Contains(fmt.Sprint(s.Body["text"]), "/verify?token=") || !strings.Contains(fmt.Sprint(s.Body["html"]), "/verify?token=") ||
		s.Body["subject"] != "Confirm your e-mail address for videogen" {
		t.Fatalf("request to Resend: %+v", s)
	}
	if strings.Contains(p.stderr.String(), "re_test_key_123") {
		t.Fatal("the Resend key reached the log")
	}
}

// TestShutdownWithABusyConnection: a client that keeps a connection busy past the shutdown deadline (here:
// headers never finished) does not cost the call log its flush nor the process its clean exit.
func TestShutdownWithABusyConnection(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SHUTDOWN_TIMEOUT": "2s", "RATE_LIMIT_RPS": "1000", "RATE_LIMIT_BURST": "1000"}
	run(t, dir, env, "accounts", "create", "--email", "busy@example.com")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "busy@example.com")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	for i := 0; i < 5; i++ {
		if r := testkit.Do(t, p.url, "GET", "/v1/models", key, nil); r.Status != 200 {
			t.Fatalf("request %d: %d", i, r.Status)
		}
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /v1/models HTTP/1.1\r\nHost: x\r\n")) // and nothing more
	testkit.Eventually(t, 10*time.Second, "the server reads the start of the headers", func() bool { return testkit.PeerHasRead(t, conn) })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("exit with a busy connection: %v\n%s", p.err, p.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit 15 s after SIGTERM with SHUTDOWN_TIMEOUT=2s")
	}
	d, err := db.Open(context.Background(), filepath.Join(dir, "data", "videogen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var rows int64
	d.R.Model(&models.CallLog{}).Count(&rows)
	if rows != 5 {
		t.Fatalf("%d call-log rows after the shutdown, want 5:\n%s", rows, p.stderr.String())
	}
}

// TestCLIAccountWithoutPassword: `accounts create` without --password prints a one-time link (valid 24 h)
// with which the person chooses a console password and signs in; the link works once and never reaches
// stderr.
func TestCLIAccountWithoutPassword(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		addr := testkit.FreeAddr(t)
		base := "http://" + addr
		env := map[string]string{"DATABASE_URL": dbURL, "ADDR": addr, "PUBLIC_BASE_URL": base, "WORKERS": "false"}
		serve(t, dir, env)

		out, stderr, code := run(t, dir, env, "accounts", "create", "--email", "Grace@Example.com")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 3 || !strings.Contains(lines[0], "member user grace@example.com") ||
			!strings.Contains(lines[1], "works once, for 24 hours") {
			t.Fatalf("accounts create without --password: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		link := lines[2]
		if !regexp.MustCompile(`^` + regexp.QuoteMeta(base) + `/password/reset\?token=[A-Za-z0-9_-]{43}$`).MatchString(link) {
			t.Fatalf("the last line is not a set-password link on PUBLIC_BASE_URL: %q", link)
		}
		token := link[strings.Index(link, "token=")+len("token="):]
		if strings.Contains(stderr, token) {
			t.Fatalf("the secret link reached stderr: %q", stderr)
		}

		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var tokens []models.EmailToken
		d.R.Find(&tokens)
		if len(tokens) != 1 || tokens[0].Purpose != models.PurposeReset || tokens[0].UsedAt != nil ||
			tokens[0].ExpiresAt.Sub(tokens[0].CreatedAt) != 24*time.Hour || strings.Contains(tokens[0].TokenHash, token) {
			t.Fatalf("tokens %+v: want one unused reset token, valid 24 h, stored hashed", tokens)
		}

		// Before the link is used nobody can sign in: the account has no password.
		b := newBrowser(t)
		b.get(base + "/signin")
		if status, _ := b.post(base+"/signin", url.Values{"email": {"grace@example.com"}, "password": {"anything-at-all-42"}}); status != 401 {
			t.Fatalf("sign-in to an account without a password: %d", status)
		}

		// The link opens the form to choose a first password, naming the account; it sets one and sends
		// the person to sign in.
		if status, body := b.get(link); status != 200 || !strings.Contains(body, "<h1>Choose your password</h1>") ||
			!strings.Contains(body, "<strong>grace@example.com</strong>") || strings.Contains(body, "new password") {
			t.Fatalf("GET the printed link: %d", status)
		}
		if status, loc := b.post(base+"/password/reset", url.Values{"token": {token}, "password": {"lighthouse-keeper-1848"}}); status != 303 || !strings.Contains(loc, "/signin") {
			t.Fatalf("set a password with the link: %d %q", status, loc)
		}
		b.get(base + "/signin")
		if status, loc := b.post(base+"/signin", url.Values{"email": {"grace@example.com"}, "password": {"lighthouse-keeper-1848"}}); status != 303 || loc != "/console" {
			t.Fatalf("sign-in with the chosen password: %d %q", status, loc)
		}
		if status, body := b.get(base + "/console"); status != 200 || !strings.Contains(body, "grace@example.com") {
			t.Fatalf("the console after signing in: %d", status)
		}

		// Once only.
		other := newBrowser(t)
		if _, body := other.get(link); !strings.Contains(body, "This link does not work") {
			t.Fatal("the printed link still opens the form after it was used")
		}
		other.get(base + "/password/forgot") // a page with a form, for a CSRF token
		if status, _ := other.post(base+"/password/reset", url.Values{"token": {token}, "password": {"someone-else-2029"}}); status != 400 {
			t.Fatalf("the printed link worked twice: %d", status)
		}
	})
}

// browser is a cookie-keeping client that follows no redirects, so each answer is seen; it sends back
// the CSRF token of the last page it got.
type browser struct {
	t    *testing.T
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(u string) (int, string) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := regexp.MustCompile(`name="_csrf" value="([^"]+)"`).FindSubmatch(body); m != nil {
		b.csrf = html.UnescapeString(string(m[1]))
	}
	return resp.StatusCode, string(body)
}

// post sends a form with the CSRF token and returns the status and the redirect target, if any.
func (b *browser) post(u string, form url.Values) (int, string) {
	b.t.Helper()
	form.Set("_csrf", b.csrf)
	resp, err := b.c.PostForm(u, form)
	if err != nil {
		b.t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestAudit: `videogen audit` says the books agree on a database in use, and names the account whose
// balance no longer equals its entries once someone edits it by hand.
func TestAudit(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	run(t, dir, env, "accounts", "create", "--email", "books@example.com")
	run(t, dir, env, "wallet", "credit", "--email", "books@example.com", "--usd", "5", "--reason", "start")
	out, stderr, code := run(t, dir, env, "audit")
	if code != 0 || !strings.Contains(out, "agree") {
		t.Fatalf("audit of sound books: %d %q %q", code, out, stderr)
	}
	d, err := db.Open(context.Background(), filepath.Join(dir, "data", "videogen.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.W.Exec("UPDATE accounts SET available_micros = available_micros + 1").Error; err != nil {
		t.Fatal(err)
	}
	d.Close()
	out, stderr, code = run(t, dir, env, "audit")
	if code == 0 || !strings.Contains(out, "account 1: balances 5000001/0 but entries sum to 5000000/0") || !strings.Contains(stderr, "2 problems") {
		t.Fatalf("audit of edited books: %d %q %q", code, out, stderr)
	}

	// Books that add up but went below zero by an entry other than a refund, dispute or adjustment.
	dir = t.TempDir()
	run(t, dir, env, "accounts", "create", "--email", "below@example.com")
	if d, err = db.Open(context.Background(), filepath.Join(dir, "data", "videogen.db")); err != nil {
		t.Fatal(err)
	}
	if err := d.W.Exec(`INSERT INTO ledger_entries (account_id, kind, delta_available, delta_reserved, available_after, reserved_after, created_at)
		VALUES (1, 'test_topup', -2000000, 0, -2000000, 0, ?)`, time.Now()).Error; err != nil {
		t.Fatal(err)
	}
	if err := d.W.Exec("UPDATE accounts SET available_micros = -2000000").Error; err != nil {
		t.Fatal(err)
	}
	d.Close()
	if out, stderr, code = run(t, dir, env, "audit"); code == 0 || !strings.Contains(out, "test_topup entry 1 left available at -2000000") {
		t.Fatalf("audit of books below zero: %d %q %q", code, out, stderr)
	}
}

// videoPart is the start of a multipart upload of an MP4 with n bytes after its header: the server takes
// it for a video and writes it to storage as it arrives.
func videoPart(n int) string {
	return "--b\r\nContent-Disposition: form-data; name=\"video_files\"; filename=\"v.mp4\"\r\nContent-Type: video/mp4\r\n\r\n" +
		"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + strings.Repeat("\x00", n)
}

// sendPartially sends a POST's headers, announcing length bytes of body, and only the first of them, over a
// connection of its own that the test's end closes.
func sendPartially(t *testing.T, base, key, path, ctype string, length int, first string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, _ = conn.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\nContent-Type: " + ctype +
		"\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n" + first))
	return conn
}
