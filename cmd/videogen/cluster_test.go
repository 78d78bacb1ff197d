package main_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pressly/goose/v3/lock"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// The replica tests run videogen as operators do (docs/operations.md): PostgreSQL-backed replicas that
// share Redis and an S3 bucket, behind Caddy configured by deploy/Caddyfile itself, with an upstream
// simulator in a process of its own. They need PostgreSQL: TEST_DATABASE_URL, else the machine's
// server at its documented address.
const machinePostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// clusterDB returns a new database of its own on the test PostgreSQL server, dropped when the test ends.
// A database, not a schema: the fault tests close it to connections and terminate its backends, which
// must touch nothing of the other tests running beside them.
func clusterDB(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		base = machinePostgres
	}
	return ownDatabase(t, base, "vg_cluster_")
}

// ownDatabase creates a database named prefix and random letters on the server of base, dropped (with
// whatever is still connected to it) when the test ends, and returns its URL.
func ownDatabase(t *testing.T, base, prefix string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s%d_%d", prefix, time.Now().UnixNano()%1e9, rand.IntN(1e6))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		_ = admin.Close()
		t.Fatalf("create a database of the test's own on the PostgreSQL server at %s: %v", base, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// adminOf returns a connection to the server of dbURL that is not to dbURL's database, for closing that
// database to connections and terminating its backends.
func adminOf(t *testing.T, dbURL string) *sql.DB {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	admin, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// cluster is the running parts of one replica test.
type cluster struct {
	dir      string
	dbURL    string
	sim      *upstreamSim
	replicas []*replica
	proxy    string // Caddy's base URL
	caddy    *exec.Cmd
	caddyLog *testkit.LockedBuffer
	key      string // a funded account's API key
	d        *db.DB
	s3       *testkit.S3Server
}

type replica struct {
	name string
	env  map[string]string
	p    *process
}

func (r *replica) url() string { return "http://" + r.env["ADDR"] }

// startCluster starts the simulator, n replicas and Caddy in front of them. over replaces replica
// settings.
func startCluster(t *testing.T, n int, over map[string]string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir(), dbURL: clusterDB(t)}
	c.sim = &upstreamSim{protocol: sim.ProtocolVideogen, addr: testkit.FreeAddr(t), dir: filepath.Join(c.dir, "sim"), duration: "300ms",
		keys: []string{"sim-cluster-key"},
		// The same tiny video for every task: these tests are about replicas, drains and crashes, not the
		// bytes. Realistic 480p renders (a video and its spritesheet per task, in a -race build) took the
		// machine's two cores under a full make test, and tasks then waited past the settle window for
		// their files while holding the credential's slots.
		output: sim.OutputTiny}
	if err := os.MkdirAll(c.sim.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c.sim.start(t)
	file := filepath.Join(c.dir, "upstreams.yaml")
	writeUpstreams(t, file, e2eCred("sim-main", "sim", c.sim.base(), "secret: sim-cluster-key", 8, // the simulator's SIM_CONCURRENCY
		e2eRoute("videogen-2.0-mini-480p", "videogen-2.0-mini-480p", "0.01")))
	c.s3 = testkit.StartS3Server(t)
	s3 := c.s3.Config
	proxyAddr := testkit.FreeAddr(t)
	c.proxy = "http://" + proxyAddr
	var addrs []string
	for i := range n {
		name := string(rune('a' + i))
		env := map[string]string{
			"DATABASE_URL": c.dbURL, "REDIS_URL": "redis://127.0.0.1:6379/0",
			"S3_ENDPOINT": s3.Endpoint, "S3_BUCKET": s3.Bucket, "S3_ACCESS_KEY_ID": s3.AccessKeyID, "S3_SECRET_ACCESS_KEY": s3.SecretAccessKey,
			"UPSTREAMS_FILE": file, "UPSTREAMS_WATCH_INTERVAL": "200ms",
			"DATA_DIR": filepath.Join(c.dir, "data-"+name), "WORKER_ID": "replica-" + name, "ADDR": testkit.FreeAddr(t),
			"METRICS_ADDR":    testkit.FreeAddr(t),
			"PUBLIC_BASE_URL": c.proxy, "TRUSTED_PROXIES": "127.0.0.1", "APP_SECRET": "cluster-test-secret-0123456789abcdef",
			"POLL_INTERVAL_MIN": "100ms", "POLL_INTERVAL_MAX": "500ms", "LEASE_DURATION": "2s",
			"RATE_LIMIT_RPS": "100000", "RATE_LIMIT_BURST": "100000", "MAX_QUEUED_PER_ACCOUNT": "100000",
			"MAX_UPLOADS_PER_ACCOUNT": "64",
			// Production's 5 s: with Caddy's retries off, a health check that runs late on a busy machine
			// (each may take up to its 2 s timeout) must still see the 503 before the listener closes.
			"SHUTDOWN_DRAIN_DELAY": "5s", "SHUTDOWN_TIMEOUT": "20s", "LOG_LEVEL": "warn",
			"GORACE": "atexit_sleep_ms=0",
		}
		for k, v := range over {
			env[k] = v
		}
		addrs = append(addrs, env["ADDR"])
		c.replicas = append(c.replicas, &replica{name: name, env: env})
	}
	// The first replica migrates the database before the others start, as docs/operations.md says.
	for _, r := range c.replicas {
		r.p = serve(t, c.dir, r.env)
	}
	c.d = testkit.OpenDB(t, c.dbURL)
	c.key = testkit.NewAccount(t, c.d, "1000").Key
	c.startCaddy(t, proxyAddr, addrs)
	return c
}

// startCaddy runs Debian's caddy with deploy/Caddyfile on loopback, with one change: the proxy never
// tries a request again on another replica (lb_try_duration 0s). A rolling restart must then lose
// nothing by the drain alone — /readyz 503 while the replica still accepts and serves, until Caddy's
// health check has taken it out — not by retries that hide a replica refusing connections.
func (c *cluster) startCaddy(t *testing.T, addr string, replicas []string) {
	t.Helper()
	caddyBin, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatal("caddy is not installed: run make test-deps (Debian's caddy package)")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	const retries = "lb_try_duration 5s"
	if n := strings.Count(string(b), retries); n != 1 {
		t.Fatalf("deploy/Caddyfile names %q %d times, want once: the test turns it off", retries, n)
	}
	caddyfile := filepath.Join(c.dir, "Caddyfile")
	if err := os.WriteFile(caddyfile, []byte(strings.Replace(string(b), retries, "lb_try_duration 0s", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(c.dir, "caddy-home")
	cmd := exec.Command(caddyBin, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "XDG_DATA_HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"VIDEOGEN_SITE=http://" + addr, "VIDEOGEN_REPLICAS=" + strings.Join(replicas, " "), "VIDEOGEN_CADDY_ADMIN=off"}
	c.caddyLog = &testkit.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = c.caddyLog, c.caddyLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.caddy = cmd
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testkit.Eventually(t, 30*time.Second, "Caddy serving the replicas", func() bool {
		resp, err := http.Get(c.proxy + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, func() string { return c.caddyLog.String() })
}

// stop sends sig to the replica and waits for it to exit.
func (r *replica) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := r.p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not stop within 60 s of %v\n%s", r.name, sig, r.p.stderr.String())
	}
}

// drainThenStop sends SIGTERM and checks the drain (docs/operations.md) on the replica itself: from the first
// moment /readyz answers 503 "shutting down" while /healthz and the API still answer; then it waits for
// the process to exit.
func (r *replica) drainThenStop(t *testing.T, key string) {
	t.Helper()
	if err := r.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "replica "+r.name+" answering /readyz 503 after SIGTERM", func() bool {
		resp := testkit.Do(t, r.url(), "GET", "/readyz", "", nil)
		return resp.Status == 503 && strings.Contains(string(resp.Body), "shutting down")
	})
	if resp := testkit.Do(t, r.url(), "GET", "/healthz", "", nil); resp.Status != 200 {
		t.Errorf("replica %s draining: /healthz %d, want 200 (alive)", r.name, resp.Status)
	}
	if resp := testkit.Do(t, r.url(), "GET", "/v1/videos?limit=1", key, nil); resp.Status != 200 {
		t.Errorf("replica %s draining: the API answered %d, want 200 (still serving while out of rotation)", r.name, resp.Status)
	}
	select {
	case <-r.p.exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("replica %s did not stop within 60 s of SIGTERM\n%s", r.name, r.p.stderr.String())
	}
}

// restart starts the replica again on its address and waits until it is ready.
func (r *replica) restart(t *testing.T, dir string) { r.p = serve(t, dir, r.env) }

// waitInRotation waits until the proxy sends the replica API requests again (its request counter, which
// starts at zero with the process, counts some): only then may the other replica leave the rotation.
func (r *replica) waitInRotation(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "replica "+r.name+" back in the proxy's rotation", func() bool {
		served := 0.0
		for _, sm := range testkit.Scrape(t, "http://"+r.env["METRICS_ADDR"]+"/metrics").Find("videogen_http_requests_total") {
			if strings.HasPrefix(sm.Labels["route"], "/v1/") {
				served += sm.Value
			}
		}
		return served >= 5
	})
}

// load is several API clients working through the proxy: creates, each with an Idempotency-Key and
// retried with the same key after an error; polls; downloads of completed videos; uploads; lists.
type load struct {
	base, key string
	// strict: any failed request counts as a failure (a rolling restart must fail none); otherwise a
	// failed request is retried and counted as a retry.
	strict atomic.Bool

	requests, failures, retries, downloads, uploads atomic.Int64
	mu                                              sync.Mutex
	tasks                                           map[string]string // Idempotency-Key → task id
	failed                                          []string          // what the failures were
	client                                          *http.Client
	png                                             []byte
	statuses                                        map[int]int    // answers by status, 0 for a transport error
	slowest                                         time.Duration  // the longest a request took
	noRetryAfter                                    int            // 503 answers without Retry-After
	codes                                           map[string]int // error codes of 5xx answers
	stop                                            chan struct{}
	wg                                              sync.WaitGroup
}

func startLoad(t *testing.T, c *cluster, clients int) *load {
	return startLoadOn(t, c.proxy, c.key, clients)
}

// startLoadOn is startLoad against base with key.
func startLoadOn(t *testing.T, base, key string, clients int) *load {
	l := &load{png: testkit.PNG(t, 64, 36), base: base, key: key, statuses: map[int]int{}, codes: map[string]int{}, tasks: map[string]string{}, stop: make(chan struct{}),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}}
	for i := range clients {
		l.wg.Add(1)
		go l.run(i)
	}
	return l
}

func (l *load) halt() {
	close(l.stop)
	l.wg.Wait()
}

// do sends one request and reads its whole answer; a transport error or a 5xx is a failure of the
// request (status 0 for a transport error).
func (l *load) do(method, path string, body []byte, headers ...string) (int, []byte, error) {
	l.requests.Add(1)
	req, err := http.NewRequest(method, l.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+l.key)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	start := time.Now()
	resp, err := l.client.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	l.mu.Lock()
	l.statuses[status]++
	l.slowest = max(l.slowest, time.Since(start))
	if status == 503 && resp.Header.Get("Retry-After") == "" {
		l.noRetryAfter++
	}
	l.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode >= 500 {
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		l.mu.Lock()
		l.codes[e.Error.Code]++
		l.mu.Unlock()
		return resp.StatusCode, b, fmt.Errorf("status %d: %s", resp.StatusCode, clipBody(b))
	}
	return resp.StatusCode, b, nil
}

// withRetries sends a request until it gets an answer that is not a failure, for at most 90 s (an outage
// of a dependency in the fault test lasts longer than RUN_TIMEOUT), 250 ms apart; every attempt after the
// first is a retry, and in strict mode every failure is counted.
func (l *load) withRetries(what, method, path string, body []byte, headers ...string) (int, []byte) {
	deadline := time.Now().Add(90 * time.Second)
	for attempt := 0; ; attempt++ {
		status, b, err := l.do(method, path, body, headers...)
		if err == nil {
			return status, b
		}
		if l.strict.Load() {
			l.failures.Add(1)
			l.note(fmt.Sprintf("%s %s: %v", what, path, err))
		}
		if time.Now().After(deadline) {
			l.failures.Add(1)
			l.note(fmt.Sprintf("%s %s: gave up after %d attempts: %v", what, path, attempt+1, err))
			return status, b
		}
		l.retries.Add(1)
		time.Sleep(250 * time.Millisecond)
	}
}

func (l *load) note(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.failed) < 20 {
		l.failed = append(l.failed, s)
	}
}

func (l *load) run(client int) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(client), 7))
	var mine []string
	downloaded := map[string]bool{}
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		switch {
		case n%24 == 0:
			key := fmt.Sprintf("cluster-%d-%d", client, n)
			body := fmt.Sprintf(`{"model":"videogen-2.0-mini-480p","prompt":"replica test %d %d","seconds":4}`, client, n)
			status, b := l.withRetries("create", "POST", "/v1/videos", []byte(body), "Content-Type", "application/json", "Idempotency-Key", key)
			if status != 200 {
				l.failures.Add(1)
				l.note(fmt.Sprintf("create %s: %d %s", key, status, clipBody(b)))
				continue
			}
			id := jsonField(b, "id")
			l.mu.Lock()
			if prev, ok := l.tasks[key]; ok && prev != id {
				l.failed = append(l.failed, fmt.Sprintf("key %s gave two tasks: %s and %s", key, prev, id))
				l.failures.Add(1)
			}
			l.tasks[key] = id
			l.mu.Unlock()
			mine = append(mine, id)
		case n%4 == 1 && n%16 == 1:
			l.upload(rng)
		case n%4 == 3 && n%8 == 7:
			if status, b := l.withRetries("list", "GET", "/v1/videos?limit=5", nil); status != 200 {
				l.failures.Add(1)
				l.note(fmt.Sprintf("list: %d %s", status, clipBody(b)))
			}
		default:
			if len(mine) == 0 {
				continue
			}
			id := mine[rng.IntN(len(mine))]
			status, b := l.withRetries("poll", "GET", "/v1/videos/"+id, nil)
			if status != 200 {
				l.failures.Add(1)
				l.note(fmt.Sprintf("poll %s: %d %s", id, status, clipBody(b)))
				continue
			}
			if jsonField(b, "status") == "completed" && !downloaded[id] {
				status, b := l.withRetries("download", "GET", "/v1/videos/"+id+"/content", nil)
				if status != 200 || len(b) == 0 {
					l.failures.Add(1)
					l.note(fmt.Sprintf("download %s: %d (%d bytes)", id, status, len(b)))
					continue
				}
				downloaded[id] = true
				l.downloads.Add(1)
			}
		}
		time.Sleep(time.Duration(20+rng.IntN(30)) * time.Millisecond)
	}
}

// upload sends one small image through /uploads/v1/files.
func (l *load) upload(rng *rand.Rand) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	part, _ := w.CreateFormFile("image_files", fmt.Sprintf("frame-%d.png", rng.IntN(1e6)))
	_, _ = part.Write(l.png)
	_ = w.Close()
	status, b := l.withRetries("upload", "POST", "/uploads/v1/files", buf.Bytes(), "Content-Type", w.FormDataContentType())
	if status != 200 {
		l.failures.Add(1)
		l.note(fmt.Sprintf("upload: %d %s", status, clipBody(b)))
		return
	}
	l.uploads.Add(1)
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// jsonField reads one top-level string field of a JSON object without a schema.
func jsonField(b []byte, name string) string {
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	s, _ := m[name].(string)
	return s
}

// settle waits until no task of the test is unfinished, then checks what the issue asks after a crash:
// every task ended exactly once (one reservation, one settlement or release), every key gave one task,
// each upstream task was created once, the books are balanced (videogen audit), and every completed video
// downloads through either replica.
func (c *cluster) settle(t *testing.T, l *load) (completed, failed int) {
	t.Helper()
	ctx := context.Background()
	settleStart := time.Now()
	testkit.Eventually(t, 90*time.Second, "every task finished", func() bool {
		var open int64
		c.d.R.WithContext(ctx).Model(&models.Task{}).Where("status IN ?", []string{"queued", "in_progress"}).Count(&open)
		return open == 0
	}, func() string {
		// What holds the tasks still open: their state, lease and next check, for the failure's reader.
		var open []models.Task
		c.d.R.WithContext(ctx).Where("status IN ?", []string{"queued", "in_progress"}).Limit(5).Find(&open)
		var b strings.Builder
		for _, t := range open {
			fmt.Fprintf(&b, "%s %s cred=%v upstream=%v lease=%v until=%v next=%v attempts=%d polls=%d; ", t.ID, t.Status, deref(t.CredentialID),
				deref(t.UpstreamTaskID), deref(t.LeaseOwner), t.LeaseUntil, t.NextCheckAt.Format(time.RFC3339Nano), t.SubmitAttempts, t.PollCount)
			var events []models.TaskEvent
			c.d.R.WithContext(ctx).Where("task_id = ?", t.ID).Order("id DESC").Limit(4).Find(&events)
			for _, e := range events {
				fmt.Fprintf(&b, "\n    %s %s→%s %s", e.At.Format(time.RFC3339Nano), e.FromStatus, e.ToStatus, e.Detail)
			}
			b.WriteString("\n")
		}
		for _, r := range c.replicas {
			if r.p != nil {
				fmt.Fprintf(&b, "replica %s log (last 3000 bytes):\n%s\n", r.name, tail(r.p.stderr.String(), 3000))
			}
		}
		return b.String()
	})
	t.Logf("every task finished %v after the load stopped", time.Since(settleStart).Round(time.Millisecond))
	var tasks []models.Task
	if err := c.d.R.WithContext(ctx).Find(&tasks).Error; err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	known := map[string]bool{}
	for _, id := range l.tasks {
		known[id] = true
	}
	l.mu.Unlock()
	if len(tasks) != len(known) {
		t.Errorf("%d tasks in the database for %d Idempotency-Keys answered: a retry made a second task, or a create answered nothing", len(tasks), len(known))
	}
	var entries []models.LedgerEntry
	if err := c.d.R.WithContext(ctx).Where("task_id IS NOT NULL").Order("id").Find(&entries).Error; err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]string{}
	for _, e := range entries {
		kinds[*e.TaskID] = append(kinds[*e.TaskID], e.Kind)
	}
	upstreamIDs := map[string]bool{}
	for _, task := range tasks {
		switch task.Status {
		case "completed":
			completed++
		case "failed":
			failed++
		default:
			t.Errorf("task %s is %s", task.ID, task.Status)
		}
		if got := strings.Join(kinds[task.ID], ","); got != "reserve,settle" && got != "reserve,release" {
			t.Errorf("task %s (%s) has ledger entries %q, want one reservation and one settlement or release", task.ID, task.Status, got)
		}
		if task.UpstreamTaskID != nil {
			upstreamIDs[*task.UpstreamTaskID] = true
		}
	}
	simTasks := readSimTasks(t, c.sim.dir)
	if len(simTasks) != len(upstreamIDs) {
		t.Errorf("the upstream holds %d tasks for %d platform tasks that reached it: some were created twice", len(simTasks), len(upstreamIDs))
	}
	if out, errOut, code := cliRun(t, c.dir, map[string]string{"DATABASE_URL": c.dbURL}, "audit"); code != 0 {
		t.Fatalf("videogen audit exited %d: the books drifted\n%s%s", code, out, errOut)
	}
	for i, task := range tasks {
		if task.Status != "completed" {
			continue
		}
		r := c.replicas[i%len(c.replicas)]
		resp := testkit.Do(t, r.url(), "GET", "/v1/videos/"+task.ID+"/content", c.key, nil)
		if resp.Status != 200 || len(resp.Body) == 0 {
			t.Errorf("completed video %s through replica %s: %d (%d bytes)", task.ID, r.name, resp.Status, len(resp.Body))
		}
	}
	return completed, failed
}

// TestReplicasBehindCaddy: two PostgreSQL replicas with Redis and S3 behind Caddy
// (deploy/Caddyfile), six clients creating, polling, downloading, uploading and listing through the proxy.
// A rolling restart (SIGTERM A, start A, SIGTERM B, start B) fails no request, with Caddy's retries
// turned off (startCaddy): each replica drains — /readyz 503 while it still accepts and answers — until
// Caddy's health check has taken it out, and only then closes its port. Then a SIGKILL of A mid-load loses no money and no
// task: clients retry what failed, creates with the same Idempotency-Key, and every task ends once.
func TestReplicasBehindCaddy(t *testing.T) {
	c := startCluster(t, 2, nil)
	a, b := c.replicas[0], c.replicas[1]
	l := startLoad(t, c, 6)
	l.strict.Store(true)
	waitRequests(t, l, 150)

	// Rolling restart: every request must succeed at its first attempt.
	for _, r := range []*replica{a, b} {
		start := time.Now()
		r.drainThenStop(t, c.key)
		t.Logf("replica %s drained and stopped in %v", r.name, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		r.restart(t, c.dir)
		t.Logf("replica %s ready again in %v", r.name, time.Since(start).Round(time.Millisecond))
		r.waitInRotation(t)
	}
	rolling := l.requests.Load()
	rollingFailures := l.failures.Load()
	if rollingFailures != 0 {
		t.Errorf("the rolling restart failed %d of %d requests: %v", rollingFailures, rolling, l.failed)
	}

	// SIGKILL: in-flight requests to A fail; clients retry them.
	l.strict.Store(false)
	// One create is caught mid-request by the kill, for certain: its body is still arriving at A. Its
	// client sees the connection fail and sends it again, with the same key, through the proxy.
	conn, err := net.Dial("tcp", a.env["ADDR"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST /v1/videos HTTP/1.1\r\nHost: " + a.env["ADDR"] + "\r\nAuthorization: Bearer " + c.key +
		"\r\nContent-Type: application/json\r\nIdempotency-Key: caught-by-the-kill\r\nContent-Length: 200\r\n\r\n" +
		`{"model":"videogen-2.0-mini-480p",`
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "A reading the create's first bytes", func() bool { return testkit.PeerHasRead(t, conn) })
	a.stop(t, syscall.SIGKILL)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := conn.Read(make([]byte, 512)); err == nil {
		t.Fatalf("the create caught by the kill was answered (%d bytes), want its connection to fail", n)
	}
	l.retries.Add(1)
	retryBody := `{"model":"videogen-2.0-mini-480p","prompt":"caught by the kill","seconds":4}`
	var firstID string
	for i := range 2 {
		status, body := l.withRetries("create", "POST", "/v1/videos", []byte(retryBody), "Content-Type", "application/json", "Idempotency-Key", "caught-by-the-kill")
		if status != 200 {
			t.Fatalf("the retried create: %d %s", status, body)
		}
		if id := jsonField(body, "id"); i == 0 {
			firstID = id
			l.mu.Lock()
			l.tasks["caught-by-the-kill"] = id
			l.mu.Unlock()
		} else if id != firstID {
			t.Fatalf("the same key gave %s, then %s", firstID, id)
		}
	}
	waitRequests(t, l, l.requests.Load()+200)
	start := time.Now()
	a.restart(t, c.dir)
	t.Logf("replica a ready again after its SIGKILL in %v", time.Since(start).Round(time.Millisecond))
	waitRequests(t, l, l.requests.Load()+100)
	l.halt()
	if n := l.failures.Load() - rollingFailures; n != 0 {
		t.Errorf("%d requests still failed after their retries around the SIGKILL: %v", n, l.failed)
	}
	start = time.Now()
	completed, failed := c.settle(t, l)
	t.Logf("settled and checked in %v", time.Since(start).Round(time.Millisecond))
	t.Logf("replicas behind Caddy: %d requests (%d during the rolling restart), %d failures, %d retries after the SIGKILL, "+
		"%d tasks (%d completed, %d failed), %d downloads and %d uploads through the proxy; drift 0 (videogen audit clean)",
		l.requests.Load(), rolling, l.failures.Load(), l.retries.Load(), completed+failed, completed, failed, l.downloads.Load(), l.uploads.Load())
	if completed == 0 {
		t.Error("no task completed")
	}
}

// waitRequests waits until the load has sent n requests.
func waitRequests(t *testing.T, l *load, n int64) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, fmt.Sprintf("%d requests sent", n), func() bool { return l.requests.Load() >= n })
}

// redisServer is a Redis of the test's own, which it stops and starts again on the same port: the
// machine's shared Redis is never touched.
type redisServer struct {
	port string
	cmd  *exec.Cmd
}

func startRedisServer(t *testing.T) *redisServer {
	t.Helper()
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	r := &redisServer{port: port}
	r.start(t)
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) url() string { return "redis://127.0.0.1:" + r.port + "/0" }

func (r *redisServer) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command("redis-server", "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("redis-server (installed with the machine's Redis): %v", err)
	}
	testkit.Eventually(t, 10*time.Second, "redis-server listening", func() bool {
		conn, err := net.Dial("tcp", "127.0.0.1:"+r.port)
		if err == nil {
			_ = conn.Close()
		}
		return err == nil
	})
}

func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// closeDatabase closes dbURL's database to new connections and terminates every backend connected to it,
// as a database lost under load; reopen undoes it. Only the test's own database is touched.
func closeDatabase(t *testing.T, dbURL string) (reopen func()) {
	t.Helper()
	return closeDatabaseTo(t, dbURL, true)
}

// closeDatabaseTo closes dbURL's database to new connections, and with terminate ends those it has.
func closeDatabaseTo(t *testing.T, dbURL string, terminate bool) (reopen func()) {
	t.Helper()
	u, _ := url.Parse(dbURL)
	name := strings.TrimPrefix(u.Path, "/")
	admin := adminOf(t, dbURL)
	if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if terminate {
		if _, err := admin.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		if _, err := admin.Exec("ALTER DATABASE " + name + " ALLOW_CONNECTIONS true"); err != nil {
			t.Fatal(err)
		}
	}
}

// describe tells what the load has seen, for a failure message.
func (l *load) describe() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d requests, by status %v, failures %v", l.requests.Load(), l.statuses, l.failed)
}

func (l *load) status(code int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statuses[code]
}

// TestDependencyFaults: one PostgreSQL replica with its own Redis and S3 server
// and four clients calling it throughout:
//   - PostgreSQL lost (the test's database closed to connections, its backends terminated): requests
//     answer 503 service_unavailable with Retry-After, none hangs, /readyz says 503; once the database is
//     back the replica recovers by itself within seconds;
//   - Redis stopped: no request fails; one warning, videogen_ratelimit_shared 0; shared again when Redis
//     returns;
//   - S3 stopped: uploads and downloads answer 503 with Retry-After; tasks completed upstream meanwhile
//     wait and are copied when storage returns, none failed, none charged twice;
//
// and then every task has ended once, drift 0.
func TestDependencyFaults(t *testing.T) {
	rs := startRedisServer(t)
	metricsAddr := testkit.FreeAddr(t)
	// RUN_TIMEOUT 20 s: the storage outage below outlasts it, and the tasks it holds must not fail; a task
	// slowed by a loaded machine still ends well within it.
	const runTimeout = 20 * time.Second
	c := startCluster(t, 1, map[string]string{"REDIS_URL": rs.url(), "METRICS_ADDR": metricsAddr, "RUN_TIMEOUT": runTimeout.String()})
	r := c.replicas[0]
	l := startLoadOn(t, r.url(), c.key, 4)
	waitRequests(t, l, 100)

	// PostgreSQL lost.
	reopen := closeDatabase(t, c.dbURL)
	outage := time.Now()
	testkit.Eventually(t, 10*time.Second, "/readyz 503 with the database closed", func() bool {
		resp := testkit.Do(t, r.url(), "GET", "/readyz", "", nil)
		return resp.Status == 503 && strings.Contains(string(resp.Body), "database unreachable")
	})
	// A console page needs the database too (the session): a page that says so, 503 with Retry-After.
	page := testkit.Do(t, r.url(), "GET", "/console", "", nil, "Cookie", "vg_session=some-session")
	if page.Status != 503 || page.Header.Get("Retry-After") == "" || !strings.Contains(string(page.Body), "Briefly unavailable") {
		t.Errorf("a console page with the database closed: %d (Retry-After %q) %s", page.Status, page.Header.Get("Retry-After"), clipBody(page.Body))
	}
	base503 := l.status(503)
	testkit.Eventually(t, 20*time.Second, "requests answered 503 during the database outage", func() bool { return l.status(503) >= base503+20 },
		l.describe)
	reopen()
	back := time.Now()
	testkit.Eventually(t, 15*time.Second, "the replica ready again after the database returned", func() bool {
		return testkit.Do(t, r.url(), "GET", "/readyz", "", nil).Status == 200
	})
	recovered := time.Since(back)
	t.Logf("database outage of %v: %d answers of 503; ready again %v after the database returned",
		back.Sub(outage).Round(time.Millisecond), l.status(503)-base503, recovered.Round(time.Millisecond))
	// From here on every request must succeed at its first attempt, Redis' outage included.
	waitRequests(t, l, l.requests.Load()+50)
	l.strict.Store(true)
	failuresBefore := l.failures.Load()

	// Redis stopped.
	scrape := func() float64 {
		v, ok := testkit.Scrape(t, "http://"+metricsAddr+"/metrics").Value("videogen_ratelimit_shared")
		if !ok {
			t.Fatal("videogen_ratelimit_shared is not exported with REDIS_URL set")
		}
		return v
	}
	if v := scrape(); v != 1 {
		t.Fatalf("videogen_ratelimit_shared = %v with Redis up, want 1", v)
	}
	rs.stop()
	testkit.Eventually(t, 10*time.Second, "videogen_ratelimit_shared 0 with Redis stopped", func() bool { return scrape() == 0 })
	waitRequests(t, l, l.requests.Load()+150)
	rs.start(t)
	testkit.Eventually(t, 15*time.Second, "videogen_ratelimit_shared 1 again after Redis returned", func() bool { return scrape() == 1 })
	if n := strings.Count(r.p.stderr.String(), "shared rate limits unavailable"); n != 1 {
		t.Errorf("%d warnings of the Redis outage in the log, want 1:\n%s", n, r.p.stderr.String())
	}
	if n := l.failures.Load() - failuresBefore; n != 0 {
		t.Errorf("%d requests failed during the Redis outage: %v", n, l.failed)
	}

	// S3 stopped.
	l.strict.Store(false)
	base503 = l.status(503)
	c.s3.Stop(t)
	s3Down := time.Now()
	testkit.Eventually(t, 30*time.Second, "uploads or downloads answered 503 with storage stopped", func() bool { return l.status(503) >= base503+5 },
		l.describe)
	// Tasks finish upstream meanwhile: their copies wait for the storage, past RUN_TIMEOUT. One is made
	// now for certain: the load's own creates slow to a trickle while its uploads and downloads wait out
	// the outage, and a loaded machine may have none in flight at the moment the storage stopped.
	during := testkit.Do(t, r.url(), "POST", "/v1/videos", c.key, `{"model":"videogen-2.0-mini-480p","prompt":"made while the storage is down","seconds":4}`,
		"Content-Type", "application/json")
	if during.Status != 200 {
		t.Fatalf("a create while the storage is down: %d %s", during.Status, clipBody(during.Body))
	}
	l.mu.Lock()
	l.tasks["made during the storage outage"] = jsonField(during.Body, "id") // settled and counted with the load's
	l.mu.Unlock()
	testkit.Eventually(t, 90*time.Second, "a task finished upstream held past RUN_TIMEOUT while the storage is down", func() bool {
		// Held: still running after its first deadline (submitted + RUN_TIMEOUT), that deadline moved on.
		var held []models.Task
		c.d.R.Where("status = ? AND submitted_at < ?", "in_progress", time.Now().Add(-runTimeout)).Find(&held)
		for _, h := range held {
			if h.RunDeadline != nil && h.RunDeadline.After(h.SubmittedAt.Add(runTimeout)) {
				t.Logf("storage down for %v: task %s, submitted %v ago, held with its deadline moved to %v from now",
					time.Since(s3Down).Round(time.Millisecond), h.ID, time.Since(*h.SubmittedAt).Round(time.Millisecond),
					time.Until(*h.RunDeadline).Round(time.Millisecond))
				return true
			}
		}
		return false
	}, func() string {
		var task models.Task
		c.d.R.Where("id = ?", jsonField(during.Body, "id")).Take(&task)
		return fmt.Sprintf("%s; the task made during the outage: %s, submitted %v, deadline %v, polls %d, error %v", l.describe(),
			task.Status, task.SubmittedAt, task.RunDeadline, task.PollCount, task.ErrorCode)
	})
	c.s3.Start(t)
	waitRequests(t, l, l.requests.Load()+100)
	l.halt()

	completed, failed := c.settle(t, l)
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("dependency faults: %d requests, answers by status %v, %d retries, slowest %v; %d tasks (%d completed, %d failed); drift 0",
		l.requests.Load(), l.statuses, l.retries.Load(), l.slowest.Round(time.Millisecond), completed+failed, completed, failed)
	for code, n := range l.codes {
		if code != "service_unavailable" {
			t.Errorf("%d answers of 5xx with code %q during the faults, want only service_unavailable", n, code)
		}
	}
	if v, _ := testkit.Scrape(t, "http://"+metricsAddr+"/metrics").Value("videogen_storage_errors_total", "op", "put"); v == 0 {
		t.Error("no copy of an output failed while the storage was down: the test did not hold any task for the storage")
	}
	if l.statuses[500] != 0 {
		t.Errorf("%d answers of 500 during the faults, want 503 service_unavailable", l.statuses[500])
	}
	if l.noRetryAfter != 0 {
		t.Errorf("%d answers of 503 without Retry-After", l.noRetryAfter)
	}
	if l.slowest > 15*time.Second {
		t.Errorf("a request took %v during the faults: it should have been answered, not held", l.slowest)
	}
	if failed != 0 {
		t.Errorf("%d tasks failed: the faults should only have delayed them", failed)
	}
	if l.failures.Load() != 0 {
		t.Errorf("%d requests failed even after their retries: %v", l.failures.Load(), l.failed)
	}
}

// TestReadyOnlyWhenServing: readiness at the start of an instance (docs/operations.md): the port answers at once,
// /healthz alive and /readyz 503 "starting", the API 503 service_unavailable with Retry-After, while the
// database is unreachable and then while another instance holds the migration lock; the instance becomes
// ready by itself once it has migrated. (The drain, and an outage while serving, are in
// TestReplicasBehindCaddy and TestDependencyFaults.)
func TestReadyOnlyWhenServing(t *testing.T) {
	dbURL := clusterDB(t)
	// Another instance is migrating: it holds goose's advisory lock, taken before the database closes.
	holder, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lockConn, err := holder.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lockConn.Close()
	if _, err := lockConn.ExecContext(context.Background(), "SELECT pg_advisory_lock($1)", lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	reopen := closeDatabaseTo(t, dbURL, false)

	dir := t.TempDir()
	env := map[string]string{"DATABASE_URL": dbURL, "ADDR": testkit.FreeAddr(t), "DATA_DIR": filepath.Join(dir, "data"),
		"SIM_DURATION": "100ms", "LOG_LEVEL": "warn", "GORACE": "atexit_sleep_ms=0"}
	cmd := exec.Command(bin)
	cmd.Dir, cmd.Env = dir, environ(env)
	logs := &testkit.LockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + env["ADDR"]
	starting := func(when string) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, "/healthz 200 "+when, func() bool {
			resp, err := http.Get(base + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == 200
		}, logs.String)
		if r := testkit.Do(t, base, "GET", "/readyz", "", nil); r.Status != 503 || !strings.Contains(string(r.Body), "starting") {
			t.Fatalf("/readyz %s: %d %s, want 503 starting", when, r.Status, r.Body)
		}
		page := testkit.Do(t, base, "GET", "/console", "", nil)
		if page.Status != 503 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(page.Body), "videogen is starting") {
			t.Fatalf("a console page %s: %d %s %q, want a 503 page that says the server is starting", when, page.Status, page.Header.Get("Content-Type"), clipBody(page.Body))
		}
		r := testkit.Do(t, base, "POST", "/v1/videos", "vg_whatever", map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "too early"})
		if r.Status != 503 || r.Header.Get("Retry-After") == "" || !strings.Contains(string(r.Body), "service_unavailable") {
			t.Fatalf("a create %s: %d %q (Retry-After %q), want 503 service_unavailable with Retry-After", when, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	starting("with the database unreachable")
	testkit.Eventually(t, 10*time.Second, "a warning that the database is unreachable", func() bool {
		return strings.Contains(logs.String(), "cannot start yet")
	}, logs.String)

	reopen()
	// The instance connects now, and waits for the lock.
	testkit.Eventually(t, 30*time.Second, "the instance waiting for the migration lock", func() bool {
		// goose tries the lock (pg_try_advisory_lock) every few seconds; the instance's backend shows it.
		var waiting int
		_ = holder.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND query LIKE '%pg_try_advisory_lock%'`).Scan(&waiting)
		return waiting > 0
	}, logs.String)
	starting("while another instance holds the migration lock")
	if _, err := lockConn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "/readyz 200 once migrated", func() bool {
		return testkit.Do(t, base, "GET", "/readyz", "", nil).Status == 200
	}, logs.String)
}
