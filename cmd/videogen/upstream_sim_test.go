package main_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestUpstreamSimArk runs `videogen upstream-sim --protocol ark` on a port the system picks, reads the
// address it prints, takes a task through the Ark adapter at it, and stops it with SIGTERM.
func TestUpstreamSimArk(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(bin, "upstream-sim", "--protocol", "ark", "--addr", "127.0.0.1:0", "--keys", "ark-key", "--dir", filepath.Join(dir, "ark"))
	cmd.Dir, cmd.Env = dir, environ(map[string]string{"SIM_DURATION": "200ms"})
	stderr := &testkit.LockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, exited := make(chan string, 1), make(chan error, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var addr string
	select {
	case line := <-lines:
		addr = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
		if !strings.HasPrefix(addr, "http://127.0.0.1:") || strings.HasSuffix(addr, ":0") {
			t.Fatalf("printed %q\n%s", line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no address printed\n%s", stderr.String())
	}

	ctx := context.Background()
	c := ark.New(addr+"/api/v3", 5*time.Second)
	cred := upstream.Credential{ID: "ark-1", Kind: "ark", Secret: "ark-key"}
	st, err := c.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-mini-480p",
		Prompt: "through the wire", Seconds: 4, Size: "864x496", AspectRatio: "16:9"}, UpstreamModel: "dreamina-seedance-2-0-fast-260128"})
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, stderr.String())
	}
	var last upstream.Status
	testkit.Eventually(t, 30*time.Second, "the task completes", func() bool {
		p, err := c.Poll(ctx, cred, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last = p; p.State == upstream.StateFailed {
			t.Fatalf("task %+v", p)
		}
		return p.State == upstream.StateCompleted
	}, func() string { return fmt.Sprintf("task %+v", last) })
	body, size, err := c.Download(ctx, cred, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, body)
	_ = body.Close()
	if n < 1000 || n != size {
		t.Fatalf("downloaded %d bytes of %d", n, size)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil || !strings.Contains(stderr.String(), "upstream simulator stopped") {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}
