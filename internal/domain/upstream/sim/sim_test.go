package sim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/testkit"
	"videogen/models"
)

func start(t *testing.T, dir string, concurrency int) (*sim.Sim, *httpapi.Client) {
	t.Helper()
	s, err := sim.New(sim.Config{Dir: dir, Duration: 300 * time.Millisecond, Concurrency: concurrency, Secrets: []string{"key-a", "key-b"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, httpapi.New("sim", hs.URL, 5*time.Second)
}

var (
	credA = upstream.Credential{ID: "a", Secret: "key-a"}
	credB = upstream.Credential{ID: "b", Secret: "key-b"}
)

func req(prompt, key string) upstream.SubmitRequest {
	return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-480p", Prompt: prompt, Seconds: 4, Size: "864x496", AspectRatio: "16:9", GenerateAudio: true}, IdempotencyKey: key}
}

// TestSimulatorOutlivesRestart: a task submitted before a restart is known after it, keeps progressing,
// and its idempotency key still finds it.
func TestSimulatorOutlivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, c := start(t, dir, 4)
	st, err := c.Submit(ctx, credA, req("a harbour", "k1"))
	if err != nil || st.State != "queued" {
		t.Fatalf("submit: %+v %v", st, err)
	}

	restarted, c2 := start(t, dir, 4)
	again, err := c2.Submit(ctx, credA, req("a harbour", "k1"))
	if err != nil || again.ID != st.ID {
		t.Fatalf("same key after restart: %+v %v, want task %s", again, err, st.ID)
	}
	if got := restarted.Tasks(); len(got) != 1 || got[0].Submissions != 2 || !got[0].GenerateAudio {
		t.Fatalf("tasks after restart %+v", got)
	}
	// Another credential cannot see it.
	if _, err := c2.Poll(ctx, credB, st.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("poll with another credential: %v", err)
	}
	var p upstream.Status
	testkit.Eventually(t, 10*time.Second, "the task completes", func() bool {
		if p, err = c2.Poll(ctx, credA, st.ID); err != nil {
			t.Fatal(err)
		}
		return p.State == "completed"
	}, func() string { return fmt.Sprintf("last: %+v", p) })
	if p.Progress != 100 {
		t.Fatalf("completed with progress %d", p.Progress)
	}
	body, size, err := c2.Download(ctx, credA, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	head := make([]byte, 12)
	if _, err := io.ReadFull(body, head); err != nil || string(head[4:8]) != "ftyp" || size < 1000 {
		t.Fatalf("download: %q size %d %v", head, size, err)
	}
}

func TestSimulatorCapacityAndDirectives(t *testing.T) {
	ctx := context.Background()
	s, c := start(t, t.TempDir(), 1)
	if _, err := c.Submit(ctx, credA, req("first", "1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(ctx, credA, req("second", "2")); !errors.Is(err, upstream.ErrBusy) {
		t.Fatalf("second task on a full credential: %v, want busy", err)
	}
	if _, err := c.Submit(ctx, credB, req("on b", "3")); err != nil {
		t.Fatalf("other credential has room: %v", err)
	}
	var rej *upstream.RejectedError
	if _, err := c.Submit(ctx, credB, req("[sim:reject] no", "4")); !errors.As(err, &rej) || rej.Policy || rej.Code != "invalid_request" {
		t.Fatalf("reject: %v, want a refusal of the parameters", err)
	}
	if _, err := c.Submit(ctx, credB, req("[sim:policy] no", "4b")); !errors.As(err, &rej) || !rej.Policy || rej.Status != 400 {
		t.Fatalf("policy: %v, want a content-policy refusal", err)
	}
	s2, c2 := start(t, t.TempDir(), 4)
	_, err := c2.Submit(ctx, credA, req("[sim:5xx-once] x", "5"))
	if !errors.Is(err, upstream.ErrTransient) || len(s2.Tasks()) != 1 {
		t.Fatalf("5xx-once first answer: %v, tasks %d", err, len(s2.Tasks()))
	}
	st, err := c2.Submit(ctx, credA, req("[sim:5xx-once] x", "5"))
	if err != nil || st.ID != s2.Tasks()[0].ID {
		t.Fatalf("5xx-once retry: %+v %v", st, err)
	}
	refused, err := c2.Submit(ctx, credB, req("[sim:fail-policy] y", "6"))
	if err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, c2, credB, refused.ID, upstream.StateFailed); !st.PolicyFailure || st.ErrorCode != "moderation_blocked" {
		t.Fatalf("[sim:fail-policy] %+v", st)
	}
	if s.Refused() != 1 {
		t.Fatalf("refused %d, want 1", s.Refused())
	}
}

// TestSimulatorPrunesOldTasks: finished tasks older than Keep are deleted with their files.
func TestSimulatorPrunesOldTasks(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	dir := t.TempDir()
	s, err := sim.New(sim.Config{Dir: dir, Duration: time.Second, Concurrency: 4, Secrets: []string{"key-a"}, Keep: time.Hour, Now: clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := httpapi.New("sim", hs.URL, 5*time.Second)
	old, err := c.Submit(ctx, credA, req("old", "k-old"))
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Hour) // the first task ended well over Keep ago
	if _, err := c.Submit(ctx, credA, req("new", "k-new")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Poll(ctx, credA, old.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("pruned task still known: %v", err)
	}
	if n := len(s.Tasks()); n != 1 {
		t.Fatalf("%d tasks kept, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "tasks", old.ID+".json")); !os.IsNotExist(err) {
		t.Fatalf("pruned task file still on disk: %v", err)
	}
}

// TestSimulatorTinyOutput: with OutputTiny every finished task serves the same few-KB MP4, which ffmpeg
// decodes to its one frame, and stills that are JPEGs — what make bench's worker run copies.
func TestSimulatorTinyOutput(t *testing.T) {
	ctx := context.Background()
	s, err := sim.New(sim.Config{Dir: t.TempDir(), Concurrency: 4, Secrets: []string{"key-a"}, Output: sim.OutputTiny,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	defer hs.Close()
	c := httpapi.New("sim", hs.URL, 5*time.Second)
	var videos [][]byte
	for i, prompt := range []string{"a harbour", "a meadow"} {
		st, err := c.Submit(ctx, credA, req(prompt, fmt.Sprint("k", i)))
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, c, credA, st.ID, upstream.StateCompleted)
		body, size, err := c.Download(ctx, credA, st.ID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(body)
		_ = body.Close()
		if err != nil || int64(len(b)) != size || len(b) > 10_000 {
			t.Fatalf("tiny video of %d bytes (Content-Length %d, %v), want a few KB", len(b), size, err)
		}
		videos = append(videos, b)
		for _, variant := range []string{"thumbnail", "spritesheet"} {
			still, typ, _, err := c.DownloadStill(ctx, credA, st.ID, variant)
			if err != nil {
				t.Fatalf("%s: %v", variant, err)
			}
			head := make([]byte, 3)
			_, err = io.ReadFull(still, head)
			_ = still.Close()
			if err != nil || typ != "image/jpeg" || string(head) != "\xff\xd8\xff" {
				t.Fatalf("%s: %q %q %v, want a JPEG", variant, typ, head, err)
			}
		}
	}
	if string(videos[0]) != string(videos[1]) {
		t.Fatal("two tasks served different tiny videos; every task serves the same bytes")
	}
	// The decoder is the proof the file is valid: ffmpeg must decode it without an error.
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatalf("ffmpeg is required for this test (apt-get install ffmpeg): %v", err)
	}
	path := filepath.Join(t.TempDir(), "tiny.mp4")
	if err := os.WriteFile(path, videos[0], 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ffmpeg, "-v", "error", "-xerror", "-i", path, "-f", "framemd5", "-").CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg cannot decode the tiny video: %v\n%s", err, out)
	}
	if frames := strings.Count(string(out), "\n0,"); frames != 1 {
		t.Fatalf("ffmpeg decoded %d frames, want 1:\n%s", frames, out)
	}
}
