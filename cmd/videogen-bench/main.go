// Command videogen-bench is the load test behind `make bench`: it starts videogen on SQLite and on
// PostgreSQL (rate limits and backlog raised, 100 funded accounts) and a bare Fiber handler, drives each
// from a separate load process (wrk) over loopback, and writes requests/s and p50/p99 latency of
// GET /v1/videos/{id} and POST /v1/videos beside the bare handler to docs/performance.md, with CPU
// profiles of the server under load. Each figure is set against its limit, measured in the same run:
// polls against the bare handler, creates against the raw-SQL ceiling of the create transaction
// (pgbench running the same statements, with the same client count, on the same PostgreSQL), and the
// worker's throughput (queued to completed and settled, two instances sharing the queue, the
// simulator answering at once) against its target.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	_ "github.com/jackc/pgx/v5/stdlib"

	"videogen/billing"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/models"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		bare(os.Args[2])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bare-file" {
		bareFile(os.Args[2], os.Args[3])
		return
	}
	var (
		videogen = flag.String("videogen", "bin/videogen", "videogen binary")
		out      = flag.String("out", "docs/performance.md", "where to write the results")
		pgURL    = flag.String("pg", envOr("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL server (a fresh database is created in it)")
		duration = flag.Duration("duration", 10*time.Second, "length of one measured run")
		runs     = flag.Int("runs", 3, "measured runs per case (the median is reported)")
		conns    = flag.Int("conns", 64, "concurrent connections of the load process")
		nAcct    = flag.Int("accounts", 100, "funded accounts the load is spread over")
		engines  = flag.String("engines", "sqlite,postgres,worker,bytes,memory,queues", "what to measure: sqlite, postgres (with the create ceiling), worker, bytes (copies and downloads of realistic videos), memory (the server's RSS under load), queues (e-mails and webhook deliveries per second, against the tree before River); scale (make bench-scale, not by default)")
		nQueued  = flag.Int("queue-items", 1000, "e-mails and webhook events each queues run sends")
		nTasks   = flag.Int("worker-tasks", 4000, "tasks the worker run completes")
	)
	flag.Parse()
	if _, err := exec.LookPath("wrk"); err != nil {
		log.Fatal("wrk is required (apt-get install wrk); `make bench` installs it")
	}
	work, err := os.MkdirTemp("", "videogen-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	b := &bench{videogen: *videogen, work: work, duration: *duration, runs: *runs, conns: *conns, accounts: *nAcct}

	if strings.Contains(*engines, "scale") {
		b.measureScale(*pgURL, *out) // scale.go: a million tasks against an empty database, its own region of the file
		if *engines == "scale" {
			fmt.Printf("\nmake bench-scale, %s\n\n%s", machine(), ratiosTable(b.ratios))
			return
		}
	}
	var results []result
	bareRes := b.measureBare()
	results = append(results, bareRes...)
	if strings.Contains(*engines, "sqlite") {
		results = append(results, b.measureVideogen("SQLite", filepath.Join(work, "sqlite", "videogen.db"))...)
	}
	if strings.Contains(*engines, "postgres") {
		pg, drop := createDatabase(*pgURL)
		results = append(results, b.measureVideogen("PostgreSQL", pg)...)
		b.ceiling = b.createCeiling(pg)
		drop()
	}
	results = append(results, b.measureBare()...) // again, to show the machine did not drift during the run
	b.pollRatios(results)
	if strings.Contains(*engines, "worker") {
		pg, drop := createDatabase(*pgURL)
		b.workerThroughput(pg, *nTasks)
		drop()
	}
	if strings.Contains(*engines, "bytes") {
		b.measureBytes(*pgURL)
	}
	if strings.Contains(*engines, "memory") {
		b.measureMemory(*pgURL)
	}
	if strings.Contains(*engines, "queues") {
		if err := writeRegion(*out, "bench-queues", b.measureQueues(*pgURL, *nQueued)); err != nil {
			log.Fatal(err)
		}
	}

	// The main region is the request figures': a run of other engines only (-engines queues) keeps it.
	if strings.Contains(*engines, "sqlite") || strings.Contains(*engines, "postgres") {
		if err := writeRegion(*out, "bench", b.report(results)); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("wrote %s", *out)
	// The verdict last, where the eye lands when the run ends.
	fmt.Printf("\nmake bench, %s\n\n%s", machine(), ratiosTable(b.ratios))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// bare serves the baseline: a Fiber handler that answers a small JSON object and does nothing else.
func bare(addr string) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/v1/videos/:id", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"id": c.Params("id"), "object": "video", "status": "queued", "progress": 0})
	})
	log.Fatal(app.Listen(addr))
}

type bench struct {
	videogen, work        string
	duration              time.Duration
	runs, conns, accounts int
	profiles              []profile
	ceiling               float64 // create transactions per second by pgbench (0: not measured)
	worker                float64 // tasks per second, queued to completed and settled (0: not measured)
	workerCPU             cpuShare
	workerBytes           float64 // mean size of a copied video
	bareRPS               float64 // the bare handler's polls/s, the mean of its runs before and after
	ratios                []ratio // every figure against its limit, in the order measured
	sections              []string
}

// cpuShare is how the machine's CPU time was spent over a window, from /proc/stat.
type cpuShare struct{ User, System, Idle float64 }

func readCPU() []float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:]
	out := make([]float64, len(f))
	for i, v := range f {
		out[i], _ = strconv.ParseFloat(v, 64)
	}
	return out
}

func cpuBetween(a, b []float64) cpuShare {
	if len(a) < 8 || len(b) < 8 {
		return cpuShare{}
	}
	d := make([]float64, len(a))
	var total float64
	for i := range a {
		d[i] = b[i] - a[i]
		total += d[i]
	}
	if total == 0 {
		return cpuShare{}
	}
	// user nice system idle iowait irq softirq steal
	return cpuShare{User: (d[0] + d[1]) / total, System: (d[2] + d[5] + d[6]) / total, Idle: (d[3] + d[4]) / total}
}

type result struct {
	Target, Case string
	RPS          float64
	P50, P99     time.Duration
	Requests     int
	Errors       int
}

type profile struct {
	Target, Case, Top string
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(url string) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.Fatalf("%s not ready", url)
}

func (b *bench) measureBare() []result {
	self, _ := os.Executable()
	addr := freeAddr()
	cmd := exec.Command(self, "bare", addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	url := "http://" + addr
	waitReady(url + "/v1/videos/x")
	targets := filepath.Join(b.work, "bare-targets.txt")
	var lines []string
	for i := 0; i < b.accounts; i++ {
		lines = append(lines, fmt.Sprintf("vg_none video_%024d", i))
	}
	_ = os.WriteFile(targets, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	return []result{b.median("bare Fiber handler", "GET /v1/videos/{id}", url, "get", targets, "")}
}

func (b *bench) measureVideogen(name, dbURL string) []result {
	log.Printf("%s: starting videogen", name)
	dataDir := filepath.Join(b.work, "data-"+strings.ToLower(name))
	url, pprofAddr, stop := b.startServer(dbURL, dataDir, "MAX_QUEUED_PER_ACCOUNT=100000000", "QUEUE_TIMEOUT=24h")
	defer stop()

	keys := b.fund(dbURL)
	// One task per account, for the poll load to read.
	var targets []string
	for _, k := range keys {
		body := `{"model":"videogen-2.0-mini-480p","prompt":"benchmark"}`
		req, _ := http.NewRequest("POST", url+"/v1/videos", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		id := between(string(b), `"id":"`, `"`)
		if resp.StatusCode != 200 || id == "" {
			log.Fatalf("setup create: %d %s", resp.StatusCode, b)
		}
		targets = append(targets, k+" "+id)
	}
	tf := filepath.Join(b.work, strings.ToLower(name)+"-targets.txt")
	_ = os.WriteFile(tf, []byte(strings.Join(targets, "\n")+"\n"), 0o600)

	get := b.median("videogen on "+name, "GET /v1/videos/{id}", url, "get", tf, pprofAddr)
	uncached := b.uncachedPolls(name, dbURL, dataDir, tf)
	post := b.median("videogen on "+name, "POST /v1/videos", url, "post", tf, pprofAddr)
	return []result{get, uncached, post}
}

// uncachedPolls measures polling with the poll cache off (POLL_CACHE_TTL=0): a second instance on the
// same database, without workers, so every poll reads the database.
func (b *bench) uncachedPolls(name, dbURL, dataDir, targets string) result {
	url, pprofAddr, stop := b.startServer(dbURL, dataDir, "WORKERS=false", "POLL_CACHE_TTL=0")
	defer stop()
	return b.median("videogen on "+name, "GET /v1/videos/{id}, poll cache off", url, "get", targets, pprofAddr)
}

// startServerPID runs `videogen serve` on dbURL with limits raised for load and pprof on, plus extra
// settings, and returns its URL, its pprof address, its process id (for its CPU time and memory) and how
// to stop it.
func (b *bench) startServerPID(dbURL, dataDir string, extra ...string) (url, pprofAddr string, pid int, stop func()) {
	addr := freeAddr()
	pprofAddr = freeAddr()
	cmd := exec.Command(b.videogen, "serve")
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"), "ADDR=" + addr, "DATABASE_URL=" + dbURL, "DATA_DIR=" + dataDir,
		"RATE_LIMIT_RPS=1000000", "RATE_LIMIT_BURST=1000000", "LOG_LEVEL=warn", "PPROF_ADDR=" + pprofAddr,
		"SHUTDOWN_DRAIN_DELAY=0", // no proxy watches it: stop at once
	}, extra...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = dieWithBench
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	url = "http://" + addr
	waitReady(url + "/readyz")
	return url, pprofAddr, cmd.Process.Pid, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}
}

// queueTasks creates n tasks of model through the API, conc at a time, spread over keys.
func queueTasks(url string, keys []string, model string, n, conc int) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	inParallel(n, conc, func(i int) {
		req, _ := http.NewRequest("POST", url+"/v1/videos", strings.NewReader(`{"model":"`+model+`","prompt":"benchmark"}`))
		req.Header.Set("Authorization", "Bearer "+keys[i%len(keys)])
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			log.Fatalf("queue a task: %d %s", resp.StatusCode, body)
		}
	})
}

// inParallel calls fn(i) for every i below n, conc calls at a time, and returns when all have.
func inParallel(n, conc int, fn func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// startServer runs `videogen serve` on dbURL with limits raised for load and pprof on, plus extra
// settings, and returns its URL, its pprof address and how to stop it.
func (b *bench) startServer(dbURL, dataDir string, extra ...string) (url, pprofAddr string, stop func()) {
	url, pprofAddr, _, stop = b.startServerPID(dbURL, dataDir, extra...)
	return url, pprofAddr, stop
}

// fund creates the accounts and keys the load is spread over, each with plenty of money.
func (b *bench) fund(dbURL string) []string {
	ctx := context.Background()
	d, err := db.Open(ctx, dbURL)
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()
	var keys []string
	for i := 0; i < b.accounts; i++ {
		u, err := accounts.Create(ctx, d, accounts.NewUser{Email: fmt.Sprintf("bench%d@example.com", i), Verified: true})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := (billing.Credit{AccountID: u.AccountID, Kind: models.KindTestTopup, Amount: 1_000_000 * money.PerUSD, Reason: "benchmark", Actor: "bench"}).Apply(ctx, d); err != nil {
			log.Fatal(err)
		}
		secret, _, err := apikeys.Create(ctx, d, u.AccountID, "bench", &u.ID, time.Now())
		if err != nil {
			log.Fatal(err)
		}
		keys = append(keys, secret)
	}
	return keys
}

const luaScript = `
local targets = {}
local i = 0
local mode = "get"
init = function(args)
  mode = args[1]
  for line in io.lines(args[2]) do
    local k, id = line:match("(%S+) (%S+)")
    table.insert(targets, {k, id})
  end
  i = math.random(#targets)
end
request = function()
  i = i % #targets + 1
  local t = targets[i]
  if mode == "post" then
    return wrk.format("POST", "/v1/videos", {["Authorization"] = "Bearer " .. t[1], ["Content-Type"] = "application/json"},
      '{"model":"videogen-2.0-mini-480p","prompt":"benchmark load"}')
  end
  return wrk.format("GET", "/v1/videos/" .. t[2], {["Authorization"] = "Bearer " .. t[1]})
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %d %d %d\n", summary.requests, e.status, e.connect + e.read + e.write + e.timeout,
    summary.duration, latency:percentile(50), latency:percentile(99)))
end
`

// median runs one case b.runs times (after a short warm-up) and returns the run with the median rate;
// with a pprof address it profiles the server during the middle run.
func (b *bench) median(target, name, url, mode, targets, pprofAddr string) result {
	script := filepath.Join(b.work, "load.lua")
	_ = os.WriteFile(script, []byte(luaScript), 0o600)
	b.wrk(url, mode, script, targets, 2*time.Second) // warm-up
	var rs []result
	for i := 0; i < b.runs; i++ {
		var prof chan string
		if pprofAddr != "" && i == b.runs/2 {
			prof = make(chan string, 1)
			go func() { prof <- b.profile(pprofAddr, b.duration-2*time.Second) }()
		}
		r := b.wrk(url, mode, script, targets, b.duration)
		r.Target, r.Case = target, name
		if prof != nil {
			b.profiles = append(b.profiles, profile{Target: target, Case: name, Top: <-prof})
		}
		log.Printf("%s %s: %.0f req/s p50 %v p99 %v errors %d", target, name, r.RPS, r.P50, r.P99, r.Errors)
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].RPS < rs[j].RPS })
	return rs[len(rs)/2]
}

func (b *bench) wrk(url, mode, script, targets string, d time.Duration) result {
	cmd := exec.Command("wrk", "-t1", "-c"+strconv.Itoa(b.conns), "-d"+strconv.Itoa(int(d.Seconds()))+"s", "-s", script, url, "--", mode, targets)
	out, err := cmd.Output()
	if err != nil {
		log.Fatalf("wrk: %v\n%s", err, out)
	}
	line := between(string(out), "RESULT ", "\n")
	f := strings.Fields(line)
	if len(f) != 6 {
		log.Fatalf("wrk output: %s", out)
	}
	n := atoi(f[0])
	dur := time.Duration(atoi(f[3])) * time.Microsecond
	return result{Requests: n, Errors: atoi(f[1]) + atoi(f[2]), RPS: float64(n) / dur.Seconds(),
		P50: time.Duration(atoi(f[4])) * time.Microsecond, P99: time.Duration(atoi(f[5])) * time.Microsecond}
}

// profile takes a CPU profile of the server and returns its top functions.
func (b *bench) profile(addr string, d time.Duration) string {
	time.Sleep(time.Second)
	return b.pprofTop(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())))
}

// pprofTop fetches a profile from url and returns `go tool pprof -top` of it (with args), from its header
// line on.
func (b *bench) pprofTop(url string, args ...string) string {
	resp, err := http.Get(url)
	if err != nil {
		return "profile failed: " + err.Error()
	}
	defer resp.Body.Close()
	path := filepath.Join(b.work, fmt.Sprintf("profile-%d.pb.gz", time.Now().UnixNano()))
	f, _ := os.Create(path)
	_, _ = io.Copy(f, resp.Body)
	_ = f.Close()
	out, err := exec.Command("go", append(append([]string{"tool", "pprof", "-top", "-nodecount=22"}, args...), b.videogen, path)...).CombinedOutput()
	if err != nil {
		return "pprof failed: " + err.Error()
	}
	s := string(out)
	if i := strings.Index(s, "Showing nodes"); i >= 0 {
		s = s[i:]
	}
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func between(s, a, b string) string {
	i := strings.Index(s, a)
	if i < 0 {
		return ""
	}
	s = s[i+len(a):]
	j := strings.Index(s, b)
	if j < 0 {
		return s
	}
	return s[:j]
}

// createDatabase makes a fresh PostgreSQL database for one run and returns its URL and a drop function.
func createDatabase(server string) (string, func()) {
	admin, err := sql.Open("pgx", server)
	if err != nil {
		log.Fatal(err)
	}
	name := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		log.Fatalf("create benchmark database: %v", err)
	}
	u, err := url.Parse(server)
	if err != nil {
		log.Fatal(err)
	}
	u.Path = "/" + name
	return u.String(), func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		_ = admin.Close()
	}
}

// pollRatios sets the poll and create figures against their limits: polls against the bare handler (the
// mean of its runs before and after), creates against the raw-SQL ceiling.
func (b *bench) pollRatios(rs []result) {
	var sum float64
	var n int
	for _, r := range rs {
		if strings.HasPrefix(r.Target, "bare") {
			sum += r.RPS
			n++
		}
	}
	b.bareRPS = sum / float64(n)
	for _, r := range rs {
		if !strings.HasPrefix(r.Target, "videogen") {
			continue
		}
		engine := strings.TrimPrefix(r.Target, "videogen on ")
		switch {
		case strings.Contains(r.Case, "cache off"):
			b.ratios = append(b.ratios, ratio{Measure: "poll, cache off, " + engine, Ours: r.RPS, Limit: b.bareRPS, Unit: "/s", Target: 0.30})
		case strings.HasPrefix(r.Case, "GET"):
			b.ratios = append(b.ratios, ratio{Measure: "poll, " + engine, Ours: r.RPS, Limit: b.bareRPS, Unit: "/s", Target: 0.75,
				Note: "polls against the bare Fiber handler answering a small JSON object, the mean of its runs before and after"})
		case strings.HasPrefix(r.Case, "POST") && engine == "PostgreSQL" && b.ceiling > 0:
			b.ratios = append(b.ratios, ratio{Measure: "create, " + engine, Ours: r.RPS, Limit: b.ceiling, Unit: "/s", Target: 0.80,
				Note: fmt.Sprintf("creates against the raw-SQL ceiling of the create transaction (`pgbench -M prepared -c %d` running its statements on the same PostgreSQL)", b.conns)})
		}
	}
}

// report is docs/performance.md's generated part: where and when, the throughput of every case, every
// figure against its limit, and the server's CPU profile during each.
func (b *bench) report(rs []result) string {
	var w bytes.Buffer
	fmt.Fprintf(&w, "## The last run of `make bench`\n\n")
	fmt.Fprintf(&w, "Measured %s. Each row is the median of %d runs of %s; load from a separate\n", machine(), b.runs, b.duration)
	fmt.Fprintf(&w, "process (`wrk -t1 -c%d`) over loopback, spread over %d funded accounts (one key each); rate limits and the backlog are raised for the run.\n", b.conns, b.accounts)
	fmt.Fprintf(&w, "The server, its workers, the database and the load generator share the same cores.\n\n")
	fmt.Fprintf(&w, "| target | request | requests/s | p50 | p99 | errors |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range rs {
		fmt.Fprintf(&w, "| %s | %s | %.0f | %s | %s | %d |\n", r.Target, r.Case, r.RPS, ms(r.P50), ms(r.P99), r.Errors)
	}
	fmt.Fprintf(&w, "\n### Against the limits\n\nEach of ours as a share of its limit, both measured in this run.\n\n%s\n", ratiosTable(b.ratios))
	for _, s := range b.sections {
		fmt.Fprintf(&w, "%s\n", s)
	}
	fmt.Fprintf(&w, "Every POST reserves funds in the ledger, inserts the task, its first log line and its call-log row. Every GET authenticates, rate-limits, reads the task and writes a call-log row. ")
	fmt.Fprintf(&w, "The plain GET rows are served as in production, with the poll cache on: a poll of an unfinished task reads the database at most once a second per task (once for a finished one), so under this load, 100 tasks polled thousands of times a second, almost every poll is a cache hit. ")
	fmt.Fprintf(&w, "The \"poll cache off\" rows (`POLL_CACHE_TTL=0`, a second instance on the same database) read the database on every poll; they show the cost of the path itself.\n\n")
	fmt.Fprintf(&w, "### Where the time goes\n\nCPU profiles of the server process during the middle run (`go tool pprof -top`).\n\n")
	for _, p := range b.profiles {
		fmt.Fprintf(&w, "#### %s — %s\n\n```\n%s```\n\n", p.Target, p.Case, p.Top)
	}
	return w.String()
}
