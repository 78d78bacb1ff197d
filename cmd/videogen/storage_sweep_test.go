package main_test

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledUploadLeavesNothingForLong: an upload cut by SIGKILL leaves its half-written file under
// data/media; once that file is older than the longest upload, the restarted server's janitor deletes
// it.
func TestKilledUploadLeavesNothingForLong(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"STORAGE_SWEEP_INTERVAL": "200ms", "WORKERS": "false"}
	run(t, dir, env, "accounts", "create", "--email", "cut@example.com")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "cut@example.com")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	part := "--b\r\nContent-Disposition: form-data; name=\"video_files\"; filename=\"v.mp4\"\r\nContent-Type: video/mp4\r\n\r\n" +
		"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + strings.Repeat("\x00", 4<<20)
	_, _ = conn.Write([]byte("POST /uploads/v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: " + strconv.Itoa(50<<20) + "\r\n\r\n" + part))
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
	deadline := time.Now().Add(10 * time.Second)
	for len(temps()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the upload never started writing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a few MB written
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
	p = serve(t, dir, env)
	deadline = time.Now().Add(10 * time.Second)
	for len(temps()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s was never swept:\n%s", left[0], p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
