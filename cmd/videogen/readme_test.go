package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestREADMEWalkthrough runs the shell blocks of the README's "Two minutes" section (videogen generate,
// then curl), read from the file as they are written, in one `bash -euo pipefail` script, and then its Go
// and JavaScript blocks (the OpenAI SDKs), so the walkthrough cannot rot. They run
// in a folder laid out like the repository after `make run`'s build (./bin/videogen, docs/examples/)
// against the binary served as `make run` serves it (TEST_TOPUPS=1, the built-in simulator, SQLite under
// data/ of that folder), only faster (SIM_DURATION, poll intervals) and on a free port.
//
// Two things differ from a reader's terminal, and only these. The one textual change: step 1's
// `export VIDEOGEN_BASE_URL=http://localhost:8080` names the test server instead, on a free port (never
// 8080); no other command of the blocks may name an address, so every one follows VIDEOGEN_BASE_URL, as
// a reader serving on another port needs. And the import block, whose https:// link CI cannot reach (and
// which the import guard would rightly refuse on loopback), runs in a subshell whose VIDEOGEN_BASE_URL is
// a second instance on the same database and data folder — as a second server of one deployment — whose
// import policy resolves the link's host to a local TLS server serving a real PNG at the link's path.
func TestREADMEWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "sed", "ffprobe"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walkthrough needs %s: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(readme), walkthrough)
	checkCurlsShowErrors(t, blocks)

	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "videogen")); err != nil {
		t.Fatal(err)
	}
	copyDir(t, "../../docs/examples", filepath.Join(dir, "docs", "examples"))

	// Every command reads the server's address from VIDEOGEN_BASE_URL, set once in step 1.
	const setBase = "export VIDEOGEN_BASE_URL=http://localhost:8080\n"
	if n := strings.Count(strings.Join(blocks, "\n")+"\n", setBase); n != 1 {
		t.Fatalf("the walkthrough sets VIDEOGEN_BASE_URL %d times with %q, want once (step 1)", n, setBase)
	}
	for i, b := range blocks {
		for _, line := range strings.Split(b, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") || line+"\n" == setBase {
				continue
			}
			if regexp.MustCompile(`localhost|127\.0\.0\.1|:8080`).MatchString(line) {
				t.Errorf("block %d names an address instead of using $VIDEOGEN_BASE_URL: %s", i+1, line)
			}
		}
	}

	// Never make run's 8080 (outside Linux's ephemeral range, but a machine may be configured otherwise).
	addr := testkit.FreeAddr(t)
	for strings.HasSuffix(addr, ":8080") {
		addr = testkit.FreeAddr(t)
	}
	// localhost, as under `make run`: the server listens on both loopback addresses, and the blocks'
	// clients reach it whichever they try first.
	_, port, _ := net.SplitHostPort(addr)
	addr = "localhost:" + port
	base := "http://" + addr
	// PUBLIC_BASE_URL follows the address, as it does under `make run` (localhost:8080 both): the signed
	// media URLs must lead back to this server, where the simulator fetches them.
	p := serve(t, dir, map[string]string{"TEST_TOPUPS": "1", "ADDR": addr, "PUBLIC_BASE_URL": base,
		"SIM_DURATION": "300ms", "POLL_INTERVAL_MIN": "50ms", "POLL_INTERVAL_MAX": "200ms"})

	importBlock := -1
	for i, b := range blocks {
		if strings.Contains(b, "/uploads/v1/import") {
			if importBlock >= 0 {
				t.Fatal("two README blocks import by link; the test sends only one to the importing instance")
			}
			importBlock = i
		}
	}
	if importBlock < 0 {
		t.Fatal("no README block imports by link")
	}
	links := regexp.MustCompile(`https://[^"'\s]+`).FindAllString(blocks[importBlock], -1)
	if len(links) != 1 {
		t.Fatalf("the import block has %d https:// links, want 1: %q", len(links), links)
	}
	link, err := url.Parse(links[0])
	if err != nil || link.Port() != "" {
		t.Fatalf("the import link %q: %v (a link with a port would not be fetched)", links[0], err)
	}
	png := testkit.PNG(t, 64, 48)
	policy := testkit.ServeHTTPSHost(t, link.Hostname(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != link.Path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}))
	dataDir := filepath.Join(dir, "data")
	importer := testkit.StartWith(t, filepath.Join(dataDir, "videogen.db"), map[string]string{
		"DATA_DIR": dataDir, "PUBLIC_BASE_URL": base, "WORKERS": "false"}, server.Options{ImportPolicy: &policy})

	var script strings.Builder
	for i, b := range blocks {
		fmt.Fprintf(&script, "# README.md, block %d of %q\n", i+1, walkthrough)
		if i == importBlock {
			fmt.Fprintf(&script, "(\nVIDEOGEN_BASE_URL=%s\n%s\n)\n", importer.URL, b)
			continue
		}
		fmt.Fprintf(&script, "%s\n", strings.Replace(b+"\n", setBase, "export VIDEOGEN_BASE_URL="+base+"\n", 1))
	}
	if err := os.WriteFile(filepath.Join(dir, "walkthrough.sh"), []byte(script.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The deadline only guards against a loop that never ends; nothing here measures time.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "walkthrough.sh")
	// HOME is the folder, so a developer's ~/.curlrc cannot change what curl does.
	cmd.Dir, cmd.Env = dir, []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's walkthrough failed: %v\n--- script\n%s\n--- output\n%s\n--- server log\n%s", err, script.String(), out.String(), p.stderr.String())
	}
	output := out.String()
	t.Logf("walkthrough output:\n%s", output)
	if !regexp.MustCompile(`saved lighthouse\.mp4 \(\d+ bytes, [^)]+\); charged 1\.200000 USD`).MatchString(output) {
		t.Errorf("videogen generate did not report the saved file and the $1.20 charged")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "boat.jpg")); err != nil || len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 {
		t.Errorf("boat.jpg is not the thumbnail JPEG: %v", err)
	}

	// The SDK examples, as written, with a key of the walkthrough's account.
	key, stderr, code := run(t, dir, map[string]string{"DATA_DIR": dataDir}, "keys", "create", "--email", "you@example.com", "--name", "sdk")
	if code != 0 {
		t.Fatalf("keys create: %s", stderr)
	}
	sdkEnv := []string{"VIDEOGEN_BASE_URL=" + base, "VIDEOGEN_API_KEY=" + strings.TrimSpace(key)}
	runGoExample(t, codeBlock(t, string(readme), walkthrough, "go"), dir, sdkEnv)
	runNodeExample(t, codeBlock(t, string(readme), walkthrough, "js"), dir, sdkEnv)

	// Step 1's promise: a link to choose a console password, on make run's address.
	if !strings.Contains(output, "works once, for 24 hours") || !strings.Contains(output, "http://localhost:8080/password/reset?token=") {
		t.Error("accounts create printed no set-password link")
	}

	// Every balance the README announces in a comment is printed, in order.
	want := regexp.MustCompile(`wallet balance .*#\s*(available [0-9.]+ USD, reserved [0-9.]+ USD)`).FindAllStringSubmatch(strings.Join(blocks, "\n"), -1)
	if len(want) == 0 {
		t.Fatal("the walkthrough announces no wallet balance")
	}
	rest := output
	for _, w := range want {
		i := strings.Index(rest, ": "+w[1]+"\n")
		if i < 0 {
			t.Fatalf("the README says %q, the walkthrough printed otherwise:\n%s", w[1], output)
		}
		rest = rest[i+len(w[1]):]
	}

	d, err := db.Open(context.Background(), filepath.Join(dataDir, "videogen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	testkit.CheckLedger(t, d)

	// Every task completed, and each downloaded MP4 is the video of one of them: H.264 of its size and
	// duration.
	var all []models.Task
	d.R.Order("created_at").Find(&all)
	mp4s, _ := filepath.Glob(filepath.Join(dir, "*.mp4"))
	if len(all) < 2 || len(mp4s) != len(all) {
		t.Fatalf("%d tasks and %d MP4 files (%v): want one download per task, at least two", len(all), len(mp4s), mp4s)
	}
	left := map[string]models.Task{}
	for _, task := range all {
		if task.Status != tasks.Completed || task.BillingState != billing.Settled {
			t.Errorf("task %s: %s, billing %s", task.ID, task.Status, task.BillingState)
		}
		left[task.ID] = task
	}
	for _, f := range mp4s {
		codec, w, h, secs := probe(t, f)
		matched := false
		for id, task := range left {
			if codec == "h264" && fmt.Sprintf("%dx%d", w, h) == task.Size && math.Abs(secs-float64(task.Seconds)) < 0.05 {
				delete(left, id)
				matched = true
				break
			}
		}
		if !matched {
			t.Errorf("%s is %s %dx%d, %.3f s: the video of no task", filepath.Base(f), codec, w, h, secs)
		}
	}

	// The create with media used the two example files, byte for byte as they are in docs/examples.
	examples := map[string]string{"image/png": sha(t, filepath.Join(dir, "docs", "examples", "first-frame.png")),
		"image/jpeg": sha(t, filepath.Join(dir, "docs", "examples", "style.jpg"))}
	var inputs []models.TaskMedia
	d.R.Order("field, position").Find(&inputs)
	var got []string
	for _, in := range inputs {
		var m models.Media
		if err := d.R.Where("id = ?", in.MediaID).Take(&m).Error; err != nil {
			t.Fatalf("media %s of task %s: %v", in.MediaID, in.TaskID, err)
		}
		got = append(got, fmt.Sprintf("%s[%d] %s %s", in.Field, in.Position, m.Source, m.ContentType))
		if m.SHA256 != examples[m.ContentType] {
			t.Errorf("%s[%d] is not the example %s file", in.Field, in.Position, m.ContentType)
		}
	}
	if want := "image_urls[0] upload image/jpeg, start_image_url[0] upload image/png"; strings.Join(got, ", ") != want || inputs[0].TaskID != inputs[1].TaskID {
		t.Errorf("inputs of the create with media: %q, want %q of one task", got, want)
	}

	// The import fetched the link's file and stored it.
	var imported []models.Media
	d.R.Where("source = ?", "import").Find(&imported)
	if len(imported) != 1 || imported[0].Origin != links[0] || imported[0].Bytes != int64(len(png)) || imported[0].ContentType != "image/png" {
		t.Errorf("imported media %+v: want the PNG of %s", imported, links[0])
	}
	if !strings.Contains(output, `"source_url":"`+links[0]+`"`) {
		t.Error("the import's answer is not in the output")
	}
}

// walkthrough is the heading of the README section the test runs.
const walkthrough = "## Two minutes: from a prompt to an MP4"

// runGoExample runs the README's Go program with `go run`, in a folder inside this module (whose go.mod
// has the SDK), and moves the MP4 it saves into dir.
func runGoExample(t *testing.T, program, dir string, env []string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.MkdirTemp(filepath.Join(root, "tmp"), "readme-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(src) })
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// -race, as the test binaries are built: the SDK compiled for them is reused from the build cache.
	runExample(t, "the Go example", src, env, goTool, "run", "-race", ".")
	if err := os.Rename(filepath.Join(src, "boat-go.mp4"), filepath.Join(dir, "boat-go.mp4")); err != nil {
		t.Fatalf("the Go example saved no boat-go.mp4: %v", err)
	}
}

// runNodeExample runs the README's JavaScript with node and the OpenAI Node SDK the tests install.
func runNodeExample(t *testing.T, program, dir string, env []string) {
	t.Helper()
	sdk := testkit.OpenAINodeDir(t)
	if err := os.Symlink(filepath.Join(sdk, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boat.mjs"), []byte(program), 0o644); err != nil {
		t.Fatal(err)
	}
	runExample(t, "the Node example", dir, env, "node", "boat.mjs")
	if _, err := os.Stat(filepath.Join(dir, "boat-node.mp4")); err != nil {
		t.Fatalf("the Node example saved no boat-node.mp4: %v", err)
	}
}

func runExample(t *testing.T, what, dir string, env []string, name string, args ...string) {
	t.Helper()
	// The deadline only guards against a hang (the Go example compiles the SDK first).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "saved boat-") {
		t.Fatalf("%s failed: %v\n%s", what, err, out)
	}
	t.Logf("%s: %s", what, out)
}

// codeBlock returns the one ```lang block of the README section that starts with heading.
func codeBlock(t *testing.T, readme, heading, lang string) string {
	t.Helper()
	var found []string
	for _, m := range regexp.MustCompile("(?s)\n```"+lang+"\n(.*?)\n```\n").FindAllStringSubmatch(section(t, readme, heading), -1) {
		found = append(found, m[1]+"\n")
	}
	if len(found) != 1 {
		t.Fatalf("the section %q has %d %s blocks, want one", heading, len(found), lang)
	}
	return found[0]
}

// section returns the README section that starts with heading, up to the next "## " heading.
func section(t *testing.T, readme, heading string) string {
	t.Helper()
	start := strings.Index(readme, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README.md has no section %q", heading)
	}
	s := readme[start+1:]
	if end := strings.Index(s[len(heading):], "\n## "); end >= 0 {
		s = s[:len(heading)+end]
	}
	return s
}

// shellBlocks returns the ```sh blocks of the README section that starts with heading, in order.
func shellBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section(t, readme, heading), -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("the section %q has no sh blocks", heading)
	}
	return blocks
}

// checkCurlsShowErrors fails for a curl in the walkthrough that could hide a failed request: each must
// fail on an HTTP error and show it.
func checkCurlsShowErrors(t *testing.T, blocks []string) {
	t.Helper()
	for _, b := range blocks {
		for _, line := range strings.Split(b, "\n") {
			if i := strings.Index(line, "curl "); i >= 0 && !strings.HasPrefix(strings.TrimSpace(line), "#") {
				args := line[i:]
				if !strings.Contains(args, "--fail-with-body") && !regexp.MustCompile(`\s(-f|--fail)\s`).MatchString(args) {
					t.Errorf("a curl that does not fail on HTTP errors: %s", line)
				}
				if regexp.MustCompile(`\s-s\s`).MatchString(args) || !strings.Contains(args, "-sS") {
					t.Errorf("a curl that hides its errors (use -sS): %s", line)
				}
			}
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// probe returns the codec, size and duration of a video file's first video stream, by ffprobe.
func probe(t *testing.T, path string) (codec string, w, h int, secs float64) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=codec_name,width,height:format=duration", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var r struct {
		Streams []struct {
			CodecName     string `json:"codec_name"`
			Width, Height int
		}
		Format struct{ Duration string }
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Streams) != 1 {
		t.Fatalf("ffprobe %s: %v %s", path, err, out)
	}
	secs, err = strconv.ParseFloat(r.Format.Duration, 64)
	if err != nil {
		t.Fatalf("ffprobe %s: duration %q", path, r.Format.Duration)
	}
	return r.Streams[0].CodecName, r.Streams[0].Width, r.Streams[0].Height, secs
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
