// Package deploycheck_test holds the deployment in deploy/ to what the code and the tools say: the
// systemd units pass systemd-analyze, the Caddyfile passes caddy and fronts two replicas as it claims,
// the environment example names exactly the service's settings, and docs/operations.md answers every
// alert. It has no code of its own: deploy/ is configuration, and these are its tests.
package deploycheck_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// tmpRoot is a folder for the whole run (the videogen binary is built into it once); TestMain removes it.
var tmpRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "videogen-deploycheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmpRoot = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// repoRoot is the module's root: the tests run in internal/deploycheck.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod two folders up from the test (%s): %v", root, err)
	}
	return root
}

// repoFile reads a file of the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tool finds a program the tests drive. A missing one fails the test: these checks are the only thing
// that holds deploy/ to what the tools accept, so skipping them would pass a broken deployment.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make test-deps` (it installs what the tests need)", name)
	}
	return path
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// videogenBinary builds the real binary once per run, with the flags `make test` and cmd/videogen's
// tests use, so the build cache they fill serves this build too.
func videogenBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		out := filepath.Join(tmpRoot, "videogen")
		cmd := exec.Command("go", "build", "-race", "-gcflags=modernc.org/...=-d=checkptr=0 -race=false",
			"-gcflags=golang.org/x/crypto/argon2=-race=false", "-o", out, "./cmd/videogen")
		cmd.Dir = repoRoot(t)
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build videogen: %v\n%s", err, b)
			return
		}
		builtBin = out
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var (
	helpMu    sync.Mutex
	helpTexts = map[string]string{}
)

// videogenHelp is what `videogen ARGS… --help` prints, asked once per run. The binary is built with the
// race detector, which waits a second at exit unless told not to.
func videogenHelp(t *testing.T, args ...string) string {
	t.Helper()
	key := strings.Join(args, " ")
	helpMu.Lock()
	defer helpMu.Unlock()
	if text, ok := helpTexts[key]; ok {
		return text
	}
	cmd := exec.Command(videogenBinary(t), append(args, "--help")...)
	cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("videogen %s --help: %v", key, err)
	}
	helpTexts[key] = string(out)
	return string(out)
}

// envExample returns the settings deploy/videogen.env.example names, in order: its `NAME=value` lines
// and its commented `# NAME=value` lines (a default shown as it is), with the value each gives.
func envExample(t *testing.T) (names []string, values map[string]string) {
	t.Helper()
	values = map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(repoFile(t, "deploy/videogen.env.example")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			// A commented setting is "# NAME=value" with one space; prose never starts with a NAME=.
			if !strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "  ") {
				continue
			}
			line = strings.TrimPrefix(rest, " ")
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok || !isEnvName(name) {
			continue
		}
		if _, seen := values[name]; seen {
			t.Errorf("deploy/videogen.env.example names %s twice", name)
			continue
		}
		names = append(names, name)
		values[name] = strings.Trim(value, `"`)
	}
	return names, values
}

// isEnvName reports whether s is an environment variable's name as the service spells them.
func isEnvName(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, r := range s {
		if (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// lockedBuffer collects a child process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
