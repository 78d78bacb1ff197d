package main_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestKilledUploadLeavesNothingForLong: an upload cut by SIGKILL leaves its half-written file under
// data/media; once that file is older than the longest upload, the restarted server's storage sweep
// deletes it.
func TestKilledUploadLeavesNothingForLong(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"STORAGE_SWEEP_INTERVAL": "200ms", "WORKERS": "false"}
	run(t, dir, env, "accounts", "create", "--email", "cut@example.com")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "cut@example.com")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	sendPartially(t, p.url, key, "/uploads/v1/files", "multipart/form-data; boundary=b", 50<<20, videoPart(4<<20))
	media := filepath.Join(dir, "data", "media")
	temps := func() []string {
		var out []string
		_ = filepath.WalkDir(media, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".put-") {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	testkit.Eventually(t, 10*time.Second, "the upload writes its first megabyte", func() bool {
		written := temps()
		if len(written) == 0 {
			return false
		}
		info, err := os.Stat(written[0])
		return err == nil && info.Size() >= 1<<20
	})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	left := temps()
	if len(left) != 1 {
		t.Fatalf("after the kill: %v", left)
	}
	// The file stays while it could belong to an upload still running; make it older than any can.
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(left[0], old, old); err != nil {
		t.Fatal(err)
	}
	// The sweep is a periodic job of the elected leader; the killed process held the leadership, which
	// lapses within River's leadership TTL (15 s) before the restarted one takes it (docs/jobs.md).
	p = serve(t, dir, env)
	testkit.Eventually(t, 40*time.Second, left[0]+" swept", func() bool { return len(temps()) == 0 },
		func() string { return p.stderr.String() })
}
