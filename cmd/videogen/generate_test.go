package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/db"
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
	addr := freeAddr(t)
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
		m := regexp.MustCompile(`the video keeps generating; resume with: videogen generate --resume (video_\S+) -o take\.mp4\n`).FindStringSubmatch(stderr.String())
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
