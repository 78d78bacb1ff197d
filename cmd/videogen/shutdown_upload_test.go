package main_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestShutdownAnswersSlowUploads: requests still waiting for their body when SIGTERM's patience runs
// out (half of SHUTDOWN_TIMEOUT) are answered 503 shutting_down with Retry-After instead of being cut
// off, the answer reaches the client, each is in the call log, and the process exits cleanly.
func TestShutdownAnswersSlowUploads(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"SHUTDOWN_TIMEOUT": "4s"}
	run(t, dir, env, "accounts", "create", "--email", "slow@example.com", "--password", "paper-boats-float-42")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "slow@example.com")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	type answer struct {
		resp *http.Response
		body string
		err  error
	}
	// start sends headers and the first part of a body, then nothing more, waits until the server has
	// read them (its handler is then reading the body), and reads the answer.
	start := func(path, ctype string, length int, first string) <-chan answer {
		conn := sendPartially(t, p.url, key, path, ctype, length, first)
		testkit.Eventually(t, 10*time.Second, "the server reads the start of "+path, func() bool { return testkit.PeerHasRead(t, conn) })
		out := make(chan answer, 1)
		go func() {
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				out <- answer{err: err}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			out <- answer{resp: resp, body: string(b)}
		}()
		return out
	}
	upload := start("/uploads/v1/files", "multipart/form-data; boundary=b", 50<<20, videoPart(64<<10))
	create := start("/v1/videos", "application/json", 500<<10, `{"model": "videogen-2.0-720p", "prompt": "`+strings.Repeat("a", 20<<10))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan answer{"upload": upload, "create": create} {
		a := <-ch
		if a.err != nil {
			t.Fatalf("%s: no answer: %v\n%s", name, a.err, p.stderr.String())
		}
		if a.resp.StatusCode != 503 || a.resp.Header.Get("Retry-After") != "5" || !strings.Contains(a.body, `"code":"shutting_down"`) {
			t.Fatalf("%s: %d Retry-After %q: %s", name, a.resp.StatusCode, a.resp.Header.Get("Retry-After"), a.body)
		}
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("exit: %v\n%s", p.err, p.stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	d, err := db.Open(context.Background(), filepath.Join(dir, "data", "videogen.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var rows []models.CallLog
	d.R.Where("status = 503 AND error_code = 'shutting_down'").Find(&rows)
	if len(rows) != 2 {
		t.Fatalf("%d call-log rows for the two answered requests, want 2", len(rows))
	}
	var media int64
	d.R.Model(&models.Media{}).Count(&media)
	if media != 0 {
		t.Fatalf("the cut upload left %d media rows", media)
	}
}
