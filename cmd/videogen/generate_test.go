package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// generateRig is a served videogen with a funded customer: env is what `videogen generate` runs with.
type generateRig struct {
	dir string
	env map[string]string
	d   *db.DB
}

func startGenerateRig(t *testing.T, dbURL, simDuration string) *generateRig {
	t.Helper()
	dir := t.TempDir()
	// PUBLIC_BASE_URL names this server: the signed URLs of uploads point there, and the simulator
	// fetches them.
	addr := testkit.FreeAddr(t)
	p := serve(t, dir, map[string]string{"DATABASE_URL": dbURL, "ADDR": addr, "PUBLIC_BASE_URL": "http://" + addr,
		"SIM_DURATION": simDuration, "POLL_INTERVAL_MIN": "10ms", "POLL_INTERVAL_MAX": "100ms",
		"WORKER_ID": "generate-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)})
	d, err := db.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	acct := testkit.NewAccount(t, d, "10")
	// GORACE: the race-built binary would otherwise sleep a second at each exit.
	return &generateRig{dir: dir, d: d, env: map[string]string{
		"VIDEOGEN_BASE_URL": p.url, "VIDEOGEN_API_KEY": acct.Key, "GORACE": "atexit_sleep_ms=0"}}
}

func (g *generateRig) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return run(t, g.dir, g.env, append([]string{"generate"}, args...)...)
}

// statusLine is a progress line when stdout is not a terminal: status, progress, elapsed time.
var statusLine = regexp.MustCompile(`^status (queued|in_progress|completed|failed) \d{1,3}% [0-9hms.]+$`)

// savedLine is the last line of a generate: the file, its size and the charge.
var savedLine = regexp.MustCompile(`^saved (\S+) \((\d+) bytes, [0-9.]+ [kMG]?B\); charged (\d+\.\d{6}) USD$`)

// checkGenerated checks the output of a generate that saved file and returns the video id: a line when
// it was created (unless resumed), plain status lines ending completed, and the saved line naming the
// file, its size and the amount charged; the file is the MP4 and nothing temporary is left beside it.
func checkGenerated(t *testing.T, dir, stdout, file, amount string, resumed bool) string {
	t.Helper()
	if strings.ContainsAny(stdout, "\r\x1b") {
		t.Fatalf("control characters in output to a pipe:\n%q", stdout)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	id := ""
	if !resumed {
		m := regexp.MustCompile(`^created (video_\S+) \(videogen-2\.0-mini-480p, 4 s, 864x496\); reserved ` + regexp.QuoteMeta(amount) + ` USD$`).FindStringSubmatch(lines[0])
		if m == nil {
			t.Fatalf("first line %q; want the created video and its reservation\n%s", lines[0], stdout)
		}
		id, lines = m[1], lines[1:]
	}
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-2], "status completed 100% ") {
		t.Fatalf("want status lines ending in completed, then the saved line:\n%s", stdout)
	}
	for _, l := range lines[:len(lines)-1] {
		if !statusLine.MatchString(l) {
			t.Fatalf("not a status line: %q\n%s", l, stdout)
		}
	}
	m := savedLine.FindStringSubmatch(lines[len(lines)-1])
	if m == nil || m[1] != file || m[3] != amount {
		t.Fatalf("last line %q; want saved %s with its size and %s USD charged", lines[len(lines)-1], file, amount)
	}
	mp4, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	if strconv.Itoa(len(mp4)) != m[2] || len(mp4) < 1000 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("%s: %d bytes (printed %s), starting %q: not the MP4", file, len(mp4), m[2], mp4[:min(len(mp4), 16)])
	}
	if parts, _ := filepath.Glob(filepath.Join(dir, ".*.part")); len(parts) > 0 {
		t.Fatalf("temporary files left: %v", parts)
	}
	return id
}

// TestGenerate: one command from a prompt to an MP4 on disk, with plain progress lines in a pipe; local
// images are uploaded and used; a failed generation and a missing key are errors that say why.
func TestGenerate(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		g := startGenerateRig(t, dbURL, "1s")

		out, stderr, code := g.run(t, "--model", "videogen-2.0-mini-480p", "--prompt", "a paper boat on a rainy street", "--seconds", "4", "-o", "boat.mp4")
		if code != 0 {
			t.Fatalf("generate: exit %d\n%s%s", code, out, stderr)
		}
		id := checkGenerated(t, g.dir, out, "boat.mp4", "0.200000", false)
		if task := testkit.Task(t, g.d, id); task.Status != "completed" || task.BillingState != "settled" {
			t.Fatalf("the task behind %s: %+v", id, task)
		}
		var keys int64
		if err := g.d.R.Model(&models.IdempotencyKey{}).Where("task_id = ?", id).Count(&keys).Error; err != nil || keys != 1 {
			t.Fatalf("%s was created with %d idempotency keys (%v), want 1", id, keys, err)
		}

		// Local files: the first frame and a reference image go up, and the video is made from them.
		if err := os.WriteFile(filepath.Join(g.dir, "first.png"), testkit.PNG(t, 64, 64), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(g.dir, "style, v2.jpg"), testkit.JPEG(t, 32, 32), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code = g.run(t, "--model", "videogen-2.0-mini-480p", "--prompt", "the boat sails off",
			"--first-frame", "first.png", "--image", "style, v2.jpg")
		if code != 0 {
			t.Fatalf("generate with images: exit %d\n%s%s", code, out, stderr)
		}
		id = strings.Fields(out)[1]
		checkGenerated(t, g.dir, out, id+".mp4", "0.200000", false)
		var in models.TaskInputs
		if err := json.Unmarshal([]byte(testkit.Task(t, g.d, id).Inputs), &in); err != nil || in.StartImageURL == "" || len(in.ImageURLs) != 1 {
			t.Fatalf("the task did not get the uploaded images: %+v %v", in, err)
		}

		// A missing image is found before anything is uploaded or paid.
		if out, stderr, code = g.run(t, "--model", "videogen-2.0-mini-480p", "--prompt", "x", "--image", "missing.png"); code != 1 ||
			!strings.Contains(stderr, "--image: open missing.png") || out != "" {
			t.Fatalf("a missing image: exit %d\n%s%s", code, out, stderr)
		}

		// A failed generation: its code and message, nothing charged, exit 1.
		out, stderr, code = g.run(t, "--model", "videogen-2.0-mini-480p", "--prompt", "a boat that sinks [sim:fail]")
		if code != 1 || !regexp.MustCompile(`error: video_\S+ failed: generation_failed: .+nothing was charged`).MatchString(stderr) ||
			!strings.Contains(out, "status failed") {
			t.Fatalf("a failed generation: exit %d\n%s%s", code, out, stderr)
		}

		// A refused request: the server's code and request id.
		if _, stderr, code = g.run(t, "--model", "videogen-9000", "--prompt", "x"); code != 1 ||
			!regexp.MustCompile(`invalid_model \(model\).*\[request \S+\]`).MatchString(stderr) {
			t.Fatalf("an unknown model: exit %d\n%s", code, stderr)
		}

		// Usage mistakes, caught before any request.
		noKey := maps.Clone(g.env)
		delete(noKey, "VIDEOGEN_API_KEY")
		if out, stderr, code = run(t, g.dir, noKey, "generate", "--model", "videogen-2.0-mini-480p", "--prompt", "x"); code != 1 ||
			!strings.Contains(stderr, "VIDEOGEN_API_KEY is not set") || out != "" {
			t.Fatalf("without a key: exit %d\n%s%s", code, out, stderr)
		}
		if _, stderr, code = g.run(t, "--prompt", "x"); code != 1 || !strings.Contains(stderr, "--model and --prompt are required") {
			t.Fatalf("without a model: exit %d\n%s", code, stderr)
		}
		if _, stderr, code = g.run(t, "--resume", id, "--prompt", "other"); code != 1 || !strings.Contains(stderr, "--prompt cannot change it") {
			t.Fatalf("--resume with --prompt: exit %d\n%s", code, stderr)
		}
		testkit.CheckLedger(t, g.d)
	})
}

// TestGenerateInterrupted: Ctrl-C while waiting leaves the video generating, prints how to resume and
// exits 130; the video completes on the server, and --resume waits for it and downloads it.
func TestGenerateInterrupted(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		g := startGenerateRig(t, dbURL, "3s")
		cmd := exec.Command(bin, "generate", "--model", "videogen-2.0-mini-480p", "--prompt", "a long take", "-o", "take.mp4")
		cmd.Dir, cmd.Env = g.dir, environ(g.env)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &testkit.LockedBuffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var printed []string
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			printed = append(printed, lines.Text())
			if strings.HasPrefix(lines.Text(), "status ") {
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		for lines.Scan() { // drain, so the process never blocks on a full pipe
			printed = append(printed, lines.Text())
		}
		err = cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 130 {
			t.Fatalf("after Ctrl-C: %v; want exit 130\n%s\n%s", err, strings.Join(printed, "\n"), stderr)
		}
		// The hint names the binary as it was run (here the test's build, by its full path), to be pasted back.
		m := regexp.MustCompile(`the video keeps generating; resume with: ` + regexp.QuoteMeta(bin) + ` generate --resume (video_\S+) -o take\.mp4\n`).FindStringSubmatch(stderr.String())
		if m == nil || !strings.HasPrefix(printed[0], "created "+m[1]+" ") {
			t.Fatalf("no resume hint for the created video:\nstdout %q\nstderr %q", printed, stderr)
		}
		id := m[1]
		if task := testkit.Task(t, g.d, id); task.Status == "failed" {
			t.Fatalf("the interrupted command failed its task: %+v", task)
		}
		if _, err := os.Stat(filepath.Join(g.dir, "take.mp4")); !os.IsNotExist(err) {
			t.Fatalf("take.mp4 exists after an interrupted wait: %v", err)
		}

		out, errOut, code := g.run(t, "--resume", id, "-o", "take.mp4")
		if code != 0 {
			t.Fatalf("resume: exit %d\n%s%s", code, out, errOut)
		}
		checkGenerated(t, g.dir, out, "take.mp4", "0.200000", true)
		if task := testkit.Task(t, g.d, id); task.Status != "completed" || task.BillingState != "settled" {
			t.Fatalf("the task after resuming: %+v", task)
		}
		// Resuming a finished video only downloads it again.
		if out, errOut, code = g.run(t, "--resume", id, "-o", "again.mp4"); code != 0 || strings.Contains(out, "status ") ||
			!strings.HasPrefix(out, "saved again.mp4 ") {
			t.Fatalf("resume of a completed video: exit %d\n%s%s", code, out, errOut)
		}
		testkit.CheckLedger(t, g.d)
	})
}

// TestGenerateOnATerminal: with stdout on a terminal the wait is a progress bar redrawn in place, not
// status lines. util-linux's script(1) provides the terminal.
func TestGenerateOnATerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("needs util-linux script(1) for a pseudo-terminal")
	}
	g := startGenerateRig(t, testkit.SQLiteURL(t), "2s")
	line := quoteArgs(bin, "generate", "--model", "videogen-2.0-mini-480p", "--prompt", "a paper boat", "-o", "tty.mp4")
	cmd := exec.Command(script, "-q", "-e", "-c", line, "/dev/null")
	cmd.Dir, cmd.Env = g.dir, environ(g.env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("generate on a terminal: %v\n%q", err, out)
	}
	s := string(out)
	bar := regexp.MustCompile(`\r(queued|in_progress|completed) +\d+s +\d+% \|`)
	if strings.Contains(s, "status ") || len(bar.FindAllString(s, -1)) < 2 || !regexp.MustCompile(`\rcompleted +\d+s +100% \|`).MatchString(s) ||
		!strings.Contains(s, "saved tty.mp4 (") {
		t.Fatalf("want a bar redrawn in place that ends completed, then the saved line:\n%q", s)
	}
	if st, err := os.Stat(filepath.Join(g.dir, "tty.mp4")); err != nil || st.Size() < 1000 {
		t.Fatalf("tty.mp4: %v", err)
	}
}

// quoteArgs joins args into a POSIX shell command line.
func quoteArgs(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// lossyProxy stands between generate and the served videogen and mistreats POST /v1/videos as plan says
// for each attempt: "pass" forwards it, "lose" forwards it and drops the connection instead of
// answering (the server made the video; the customer never hears of it), "hold" does the same after
// the test releases it, and "503" answers 503 without forwarding.
type lossyProxy struct {
	url     string
	mu      sync.Mutex
	plan    []string // one per create attempt; "pass" once it runs out
	keys    []string // the Idempotency-Key of each create attempt
	held    chan struct{}
	release chan struct{}
}

func startLossyProxy(t *testing.T, target string) *lossyProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &lossyProxy{held: make(chan struct{}, 1), release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/videos" {
			rp.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		do := "pass"
		if len(p.plan) > 0 {
			do, p.plan = p.plan[0], p.plan[1:]
		}
		p.keys = append(p.keys, r.Header.Get("Idempotency-Key"))
		p.mu.Unlock()
		switch do {
		case "503":
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
		case "lose", "hold":
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Errorf("the server answered the create %d: %s", rec.Code, rec.Body)
			}
			if do == "hold" {
				p.held <- struct{}{}
				<-p.release
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	p.url = srv.URL
	return p
}

func (p *lossyProxy) set(plan ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan, p.keys = plan, nil
}

func (p *lossyProxy) sentKeys() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.keys)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// taskCount is how many tasks the database holds.
func taskCount(t *testing.T, d *db.DB) int64 {
	t.Helper()
	var n int64
	if err := d.R.Model(&models.Task{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// maybeCreated is what generate says when a create got no clear answer: the key it sent and how to find
// the video, never that nothing was charged.
var maybeCreated = regexp.MustCompile(`(?s)The video may have been created.*Idempotency-Key: (\S+)\n.*GET /v1/videos.*curl .*/v1/videos\?limit=5.*--resume video_`)

// TestGenerateCreateAnswerLost: when the server made the video but every answer to the create was lost,
// generate does not claim that nothing was charged: it says the video may exist, prints the key and how
// to find it, and running the command again with that key gets the one video, charged once. A 503 is as
// uncertain; only a refusal is reported as free.
func TestGenerateCreateAnswerLost(t *testing.T) {
	g := startGenerateRig(t, testkit.SQLiteURL(t), "1s")
	proxy := startLossyProxy(t, g.env["VIDEOGEN_BASE_URL"])
	viaProxy := maps.Clone(g.env)
	viaProxy["VIDEOGEN_BASE_URL"] = proxy.url
	args := []string{"generate", "--model", "videogen-2.0-mini-480p", "--prompt", "a paper boat on a rainy street", "-o", "boat.mp4"}

	proxy.set("lose", "lose", "lose", "lose", "lose", "lose") // more than the client's attempts
	out, stderr, code := run(t, g.dir, viaProxy, args...)
	m := maybeCreated.FindStringSubmatch(stderr)
	if code != 1 || out != "" || m == nil || strings.Contains(stderr, "nothing was charged") {
		t.Fatalf("a create whose answers were lost: exit %d\nstdout %q\nstderr %s", code, out, stderr)
	}
	key := m[1]
	if !strings.Contains(stderr, "--idempotency-key "+key) {
		t.Fatalf("no re-run with the key suggested:\n%s", stderr)
	}
	sent := proxy.sentKeys()
	if len(sent) < 2 || slices.IndexFunc(sent, func(k string) bool { return k != key }) >= 0 {
		t.Fatalf("the attempts carried %q; want the printed key %s on every one", sent, key)
	}
	var row models.IdempotencyKey
	if err := g.d.R.Where(&models.IdempotencyKey{Key: key}).First(&row).Error; err != nil {
		t.Fatalf("the server has no video for the printed key %s: %v", key, err)
	}
	if n := taskCount(t, g.d); n != 1 {
		t.Fatalf("%d tasks after the lost create; want the one its first attempt made", n)
	}

	// As the message says: the same command with the key finds that video instead of paying again.
	out, stderr, code = run(t, g.dir, g.env, append(args, "--idempotency-key", key)...)
	if code != 0 {
		t.Fatalf("re-run with the key: exit %d\n%s%s", code, out, stderr)
	}
	// The video may have completed meanwhile: then there are no status lines, only the download.
	if !strings.HasPrefix(out, "created "+row.TaskID+" ") || !savedLine.MatchString(lastLine(out)) {
		t.Fatalf("the re-run printed\n%s\nwant %s, the video of key %s, saved", out, row.TaskID, key)
	}
	if mp4, err := os.ReadFile(filepath.Join(g.dir, "boat.mp4")); err != nil || len(mp4) < 1000 || string(mp4[4:8]) != "ftyp" {
		t.Fatalf("boat.mp4 after the re-run: %d bytes, %v", len(mp4), err)
	}
	if n := taskCount(t, g.d); n != 1 {
		t.Fatalf("%d tasks after the re-run; want 1", n)
	}
	if es := testkit.Entries(t, g.d, row.TaskID); len(es) != 2 {
		t.Fatalf("ledger entries of %s: %v; want one reservation, settled once", row.TaskID, testkit.Kinds(es))
	}

	// A 5xx may come after the work was done: as uncertain as a lost answer.
	proxy.set("503", "503", "503", "503", "503", "503")
	out, stderr, code = run(t, g.dir, viaProxy, args...)
	if code != 1 || out != "" || !maybeCreated.MatchString(stderr) || strings.Contains(stderr, "nothing was charged") {
		t.Fatalf("a create answered 503: exit %d\nstdout %q\nstderr %s", code, out, stderr)
	}

	// A refusal is certain: then, and only then, nothing was charged.
	out, stderr, code = run(t, g.dir, g.env, "generate", "--model", "videogen-9000", "--prompt", "x")
	if code != 1 || maybeCreated.MatchString(stderr) || !strings.Contains(stderr, "invalid_model") || !strings.Contains(stderr, "nothing was charged") {
		t.Fatalf("a refused create: exit %d\n%s%s", code, out, stderr)
	}
	if n := taskCount(t, g.d); n != 1 {
		t.Fatalf("%d tasks; want still 1", n)
	}
	testkit.CheckLedger(t, g.d)
}

// TestGenerateInterruptedWhileCreating: Ctrl-C while the create is on its way does not cut it short,
// and when its answer is then lost, generate exits 130 saying the video may have been created, with the
// key, rather than "nothing was charged".
func TestGenerateInterruptedWhileCreating(t *testing.T) {
	g := startGenerateRig(t, testkit.SQLiteURL(t), "1s")
	proxy := startLossyProxy(t, g.env["VIDEOGEN_BASE_URL"])
	env := maps.Clone(g.env)
	env["VIDEOGEN_BASE_URL"] = proxy.url
	proxy.set("hold", "lose", "lose", "lose", "lose", "lose")

	cmd := exec.Command(bin, "generate", "--model", "videogen-2.0-mini-480p", "--prompt", "a long take", "-o", "take.mp4")
	cmd.Dir, cmd.Env = g.dir, environ(env)
	var stdout, stderr testkit.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proxy.held: // the server made the video; its answer is held back
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the create never arrived\n%s", &stderr)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	// The answer is lost only once generate has seen the interrupt, or the test would prove nothing.
	time.Sleep(200 * time.Millisecond)
	close(proxy.release)
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Fatalf("after Ctrl-C while creating: %v; want exit 130\n%s%s", err, &stdout, &stderr)
	}
	m := maybeCreated.FindStringSubmatch(stderr.String())
	if m == nil || strings.Contains(stderr.String(), "nothing was charged") || !strings.HasPrefix(stderr.String(), "interrupted; create: ") {
		t.Fatalf("after Ctrl-C while creating:\nstdout %q\nstderr %s", &stdout, &stderr)
	}
	var row models.IdempotencyKey
	if err := g.d.R.Where(&models.IdempotencyKey{Key: m[1]}).First(&row).Error; err != nil {
		t.Fatalf("the server has no video for the printed key %s: %v", m[1], err)
	}
}

// TestGenerateRefusesAnUnwritableOutput: an output that cannot receive the MP4 (an existing folder, a
// folder that does not exist, a parent that is a file or cannot be written) is refused before anything is
// created or paid for.
func TestGenerateRefusesAnUnwritableOutput(t *testing.T) {
	g := startGenerateRig(t, testkit.SQLiteURL(t), "1s")
	for _, dir := range []string{"clips", "readonly"} {
		if err := os.Mkdir(filepath.Join(g.dir, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(g.dir, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"clips":             "-o clips is a folder",
		"clips/":            "-o clips/ is a folder",
		"missing/boat.mp4":  "the folder missing does not exist",
		"notes.txt/out.mp4": "the folder notes.txt does not exist",
	}
	if runtime.GOOS == "linux" {
		cases["/proc/boat.mp4"] = "cannot write in the folder /proc" // refused even to root
	}
	if os.Geteuid() != 0 { // root writes in a folder whatever its mode
		if err := os.Chmod(filepath.Join(g.dir, "readonly"), 0o555); err != nil {
			t.Fatal(err)
		}
		cases["readonly/boat.mp4"] = "cannot write in the folder readonly"
	}
	for output, want := range cases {
		out, stderr, code := g.run(t, "--model", "videogen-2.0-mini-480p", "--prompt", "a paper boat", "-o", output)
		if code != 1 || out != "" || !strings.Contains(stderr, want) {
			t.Errorf("-o %s: exit %d\nstdout %q\nstderr %q; want %q", output, code, out, stderr, want)
		}
	}
	if _, stderr, code := g.run(t, "--resume", "video_x", "-o", "clips"); code != 1 || !strings.Contains(stderr, "-o clips is a folder") {
		t.Errorf("--resume -o clips: exit %d\n%s", code, stderr)
	}
	if n := taskCount(t, g.d); n != 0 {
		t.Fatalf("%d tasks created; want none", n)
	}
	if left, _ := filepath.Glob(filepath.Join(g.dir, "*", ".videogen-check-*")); len(left) > 0 {
		t.Fatalf("test files left: %v", left)
	}
}
