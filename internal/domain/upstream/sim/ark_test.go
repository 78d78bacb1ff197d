package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/internal/testkit"
	"videogen/models"
)

// arkSim is a simulator speaking Ark's protocol behind a test server, with the Authorization headers
// its presigned video URLs received.
type arkSim struct {
	*sim.Sim
	srv      *httptest.Server
	client   *ark.Client
	mu       sync.Mutex
	fileAuth []string
}

func startArk(t *testing.T, cfg sim.Config) *arkSim {
	t.Helper()
	cfg.Protocol = sim.ProtocolArk
	if cfg.Duration == 0 {
		cfg.Duration = 300 * time.Millisecond
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 4
	}
	if cfg.Secrets == nil {
		cfg.Secrets = []string{"key-a", "key-b"}
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &arkSim{Sim: s}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/files/") {
			a.mu.Lock()
			a.fileAuth = append(a.fileAuth, r.Header.Get("Authorization"))
			a.mu.Unlock()
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(a.srv.Close)
	a.client = ark.New(a.srv.URL+"/api/v3", 5*time.Second)
	return a
}

// rawTask reads a task's Ark answer as JSON, to see what the adapter does not surface.
func (a *arkSim) rawTask(t *testing.T, secret, id string) map[string]any {
	t.Helper()
	r, _ := http.NewRequest(http.MethodGet, a.srv.URL+"/api/v3/contents/generations/tasks/"+id, nil)
	r.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// media serves input files, as a customer's storage would.
func media(t *testing.T) string { return testkit.ProviderMedia(t) }

func arkReq(prompt string) upstream.SubmitRequest {
	return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-mini-480p", Prompt: prompt, Seconds: 4,
		Size: "864x496", AspectRatio: "16:9", GenerateAudio: true}, UpstreamModel: "dreamina-seedance-2-0-fast-260128", IdempotencyKey: prompt}
}

// waitState polls until the task reaches state; it fails at once if the task ends in another.
func waitState(t *testing.T, p upstream.Provider, cred upstream.Credential, id, state string) upstream.Status {
	t.Helper()
	var st upstream.Status
	testkit.Eventually(t, 10*time.Second, "task "+id+" "+state, func() bool {
		var err error
		if st, err = p.Poll(context.Background(), cred, id); err != nil {
			t.Fatalf("poll %s: %v", id, err)
		}
		if st.State != state && (st.State == upstream.StateCompleted || st.State == upstream.StateFailed) {
			t.Fatalf("task %s is %+v, want %s", id, st, state)
		}
		return st.State == state
	}, func() string { return fmt.Sprintf("last: %+v", st) })
	return st
}

// TestArkProtocol: a task goes through the Ark adapter and the simulator's Ark protocol — every field
// mapped, media fetched, usage reported, the video fetched from a presigned URL without the credential
// — and survives a restart of the simulator, its video URL still valid.
func TestArkProtocol(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := startArk(t, sim.Config{Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	m := media(t)
	seed := int64(7)
	refs := upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "a harbour", Seconds: 5,
		Size: "960x960", AspectRatio: "1:1", GenerateAudio: false, Watermark: true, Seed: &seed,
		TaskInputs: models.TaskInputs{ImageURLs: []string{m + "/r.png"}, VideoURLs: []string{m + "/v.mp4"}, AudioURLs: []string{m + "/a.mp3"}}},
		UpstreamModel: "dreamina-seedance-2-0-260128"}
	st, err := a.client.Submit(ctx, credA, refs)
	if err != nil || !strings.HasPrefix(st.ID, "cgt-") || st.State != upstream.StateQueued {
		t.Fatalf("submit: %+v %v", st, err)
	}
	frames := arkReq("between two frames")
	frames.StartImageURL, frames.EndImageURL = m+"/first.png", m+"/last.png"
	if _, err := a.client.Submit(ctx, credA, frames); err != nil {
		t.Fatal(err)
	}
	byID := map[string]sim.Task{}
	for _, x := range a.Tasks() {
		byID[x.Prompt] = x
	}
	got := byID["a harbour"]
	if got.Model != "dreamina-seedance-2-0-260128" || got.Resolution != "720p" || got.AspectRatio != "1:1" || got.Size != "960x960" ||
		got.Seconds != 5 || got.GenerateAudio || !got.Watermark || got.Seed == nil || *got.Seed != 7 || got.InputBytes == 0 {
		t.Fatalf("the simulator read %+v", got)
	}
	roles := func(x sim.Task) (out []string) {
		for _, md := range x.Media {
			out = append(out, md.Role+" "+strings.TrimPrefix(md.URL, m))
		}
		return out
	}
	if r := strings.Join(roles(got), ","); r != "reference_image /r.png,reference_video /v.mp4,reference_audio /a.mp3" {
		t.Fatalf("media %s", r)
	}
	if r := strings.Join(roles(byID["between two frames"]), ","); r != "first_frame /first.png,last_frame /last.png" {
		t.Fatalf("frames %s", r)
	}
	if _, err := a.client.Poll(ctx, credB, st.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("poll with another credential: %v", err)
	}

	done := waitState(t, a.client, credA, st.ID, upstream.StateCompleted)
	// Seedance's usage for 5 s of 960x960 (as many pixels as 1280x720): the 108900 tokens of Ark's examples.
	if done.Progress != 100 || done.Usage != (upstream.Usage{CompletionTokens: 108900, TotalTokens: 108900}) {
		t.Fatalf("completed %+v", done)
	}
	raw := a.rawTask(t, "key-a", st.ID)
	videoURL := raw["content"].(map[string]any)["video_url"].(string)
	if raw["status"] != "succeeded" || raw["seed"] != 7.0 || raw["resolution"] != "720p" || raw["ratio"] != "1:1" || raw["duration"] != 5.0 ||
		raw["framespersecond"] != 24.0 || !strings.HasPrefix(videoURL, a.srv.URL+"/files/"+st.ID+".mp4?") {
		t.Fatalf("Ark answer %v", raw)
	}

	// A restart: the task, and the URL issued before it, are still good.
	b := startArk(t, sim.Config{Dir: dir, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	body, size, err := b.client.Download(ctx, credA, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 12)
	if _, err := io.ReadFull(body, head); err != nil || string(head[4:8]) != "ftyp" || size < 1000 {
		t.Fatalf("download: %q size %d %v", head, size, err)
	}
	_ = body.Close()
	u, _ := url.Parse(videoURL)
	old := b.srv.URL + u.Path + "?" + u.RawQuery
	if code := get(t, old); code != http.StatusOK {
		t.Fatalf("a URL issued before the restart answered %d", code)
	}
	q := u.Query()
	q.Set("exp", "99999999999")
	if code := get(t, b.srv.URL+u.Path+"?"+q.Encode()); code != http.StatusForbidden {
		t.Fatalf("a URL with a forged expiry answered %d", code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.fileAuth) != 3 || strings.Join(b.fileAuth, "") != "" {
		t.Fatalf("video URLs got Authorization %q", b.fileAuth)
	}
}

func get(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestArkDirectives(t *testing.T) {
	ctx := context.Background()
	a := startArk(t, sim.Config{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	var rej *upstream.RejectedError
	if _, err := a.client.Submit(ctx, credA, arkReq("[sim:policy] x")); !errors.As(err, &rej) || !rej.Policy || rej.Code != "InputTextSensitiveContentDetected" || rej.Status != 400 {
		t.Fatalf("policy: %v", err)
	}
	if _, err := a.client.Submit(ctx, credA, arkReq("[sim:reject] x")); !errors.As(err, &rej) || rej.Policy || rej.Code != "InvalidParameter" {
		t.Fatalf("reject: %v", err)
	}
	mixed := arkReq("frames and references")
	mixed.StartImageURL, mixed.ImageURLs = media(t)+"/f.png", []string{media(t) + "/r.png"}
	if _, err := a.client.Submit(ctx, credA, mixed); !errors.As(err, &rej) || rej.Policy || rej.Code != "InvalidParameter" {
		t.Fatalf("a first frame with a reference image: %v", err)
	}

	// No idempotency key: the first submission is accepted but its answer lost; the retry is a second task.
	if _, err := a.client.Submit(ctx, credA, arkReq("[sim:5xx-once] x")); !errors.Is(err, upstream.ErrTransient) || len(a.Tasks()) != 1 {
		t.Fatalf("5xx-once: %v, %d tasks", err, len(a.Tasks()))
	}
	retry, err := a.client.Submit(ctx, credA, arkReq("[sim:5xx-once] x"))
	if err != nil || len(a.Tasks()) != 2 {
		t.Fatalf("5xx-once retry: %+v %v, %d tasks", retry, err, len(a.Tasks()))
	}

	fail, err := a.client.Submit(ctx, credB, arkReq("[sim:fail] x"))
	if err != nil {
		t.Fatal(err)
	}
	failPolicy, err := a.client.Submit(ctx, credB, arkReq("[sim:fail-policy] x"))
	if err != nil {
		t.Fatal(err)
	}
	if st := waitState(t, a.client, credB, fail.ID, upstream.StateFailed); st.PolicyFailure || st.ErrorCode != "InternalServiceError" {
		t.Fatalf("[sim:fail] %+v", st)
	}
	if st := waitState(t, a.client, credB, failPolicy.ID, upstream.StateFailed); !st.PolicyFailure || st.ErrorCode != "OutputVideoSensitiveContentDetected" {
		t.Fatalf("[sim:fail-policy] %+v", st)
	}
	if _, _, err := a.client.Download(ctx, credB, fail.ID); !errors.Is(err, upstream.ErrTransient) {
		t.Fatalf("download of a failed task: %v", err)
	}

	full := startArk(t, sim.Config{Dir: t.TempDir(), Concurrency: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if _, err := full.client.Submit(ctx, credA, arkReq("[sim:slow] first")); err != nil {
		t.Fatal(err)
	}
	if _, err := full.client.Submit(ctx, credA, arkReq("second")); !errors.Is(err, upstream.ErrBusy) || full.Refused() != 1 {
		t.Fatalf("second task on a full credential: %v, refused %d", err, full.Refused())
	}
}

// TestArkVideoURLExpires: a video URL lasts Keep after the task finished, as Ark's last 24 hours.
func TestArkVideoURLExpires(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	a := startArk(t, sim.Config{Dir: t.TempDir(), Duration: time.Minute, Keep: time.Hour, Now: clock, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	st, err := a.client.Submit(ctx, credA, arkReq("x"))
	if err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Minute)
	body, _, err := a.client.Download(ctx, credA, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	_ = body.Close()
	advance(time.Hour)
	if _, _, err := a.client.Download(ctx, credA, st.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("download after the URL expired: %v", err)
	}
}

// TestRevokedCredential: [sim:401] answers 401 and revokes the credential for every later call, in
// both protocols, until Reinstate (or a restart of the simulator).
func TestRevokedCredential(t *testing.T) {
	ctx := context.Background()
	for _, protocol := range []string{sim.ProtocolOpenAI, sim.ProtocolArk} {
		t.Run(protocol, func(t *testing.T) {
			dir := t.TempDir()
			var s *sim.Sim
			var p upstream.Provider
			restart := func() {
				if protocol == sim.ProtocolArk {
					a := startArk(t, sim.Config{Dir: dir, Duration: 50 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
					s, p = a.Sim, a.client
					return
				}
				s, p = start(t, dir, 4)
			}
			restart()
			first, err := p.Submit(ctx, credA, arkReq("fine"))
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, p, credA, first.ID, upstream.StateCompleted)
			if _, err := p.Submit(ctx, credA, arkReq("[sim:401] x")); !errors.Is(err, upstream.ErrAuth) {
				t.Fatalf("[sim:401]: %v", err)
			}
			if _, err := p.Poll(ctx, credA, first.ID); !errors.Is(err, upstream.ErrAuth) {
				t.Fatalf("poll with the revoked credential: %v", err)
			}
			if _, _, err := p.Download(ctx, credA, first.ID); !errors.Is(err, upstream.ErrAuth) {
				t.Fatalf("download with the revoked credential: %v", err)
			}
			if _, err := p.Submit(ctx, credB, arkReq("other key")); err != nil {
				t.Fatalf("another credential: %v", err)
			}
			s.Reinstate()
			if _, err := p.Poll(ctx, credA, first.ID); err != nil {
				t.Fatalf("poll after Reinstate: %v", err)
			}
			if _, err := p.Submit(ctx, credA, arkReq("[sim:401] again")); !errors.Is(err, upstream.ErrAuth) {
				t.Fatal(err)
			}
			restart()
			body, _, err := p.Download(ctx, credA, first.ID)
			if err != nil {
				t.Fatalf("download after a restart: %v", err)
			}
			_ = body.Close()
		})
	}
}

// TestOpenAIRequestFields: the provider's model name and the seed reach the simulator.
func TestOpenAIRequestFields(t *testing.T) {
	s, c := start(t, t.TempDir(), 4)
	r := req("seeded", "k")
	seed := int64(99)
	r.Seed, r.UpstreamModel = &seed, "sora-2"
	if _, err := c.Submit(context.Background(), credA, r); err != nil {
		t.Fatal(err)
	}
	got := s.Tasks()[0]
	if got.Model != "sora-2" || got.Seed == nil || *got.Seed != 99 {
		t.Fatalf("task %+v", got)
	}
}

// fakeClock is a settable clock for the simulator.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// rawCall makes one Ark API call with the secret and returns the status and decoded body.
func (a *arkSim) rawCall(t *testing.T, method, secret, path, body string) (int, map[string]any) {
	t.Helper()
	r, _ := http.NewRequest(method, a.srv.URL+"/api/v3/contents/generations/tasks"+path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+secret)
	r.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

func errorCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// TestArkCancel: DELETE as Ark does it in each state — a queued task is cancelled and frees its place,
// a running or cancelled one is refused, a finished one is deleted with its files.
func TestArkCancel(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &fakeClock{now: time.Now()}
	a := startArk(t, sim.Config{Dir: dir, Duration: time.Minute, Concurrency: 1, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	first, err := a.client.Submit(ctx, credA, arkReq("first"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.client.Submit(ctx, credA, arkReq("second")); !errors.Is(err, upstream.ErrBusy) {
		t.Fatalf("a second task on a full credential: %v", err)
	}
	if err := a.client.Cancel(ctx, credA, first.ID); err != nil {
		t.Fatalf("cancel of a queued task: %v", err)
	}
	if st, err := a.client.Poll(ctx, credA, first.ID); err != nil || st.State != upstream.StateFailed || st.ErrorCode != "cancelled" {
		t.Fatalf("a cancelled task reads %+v %v", st, err)
	}
	if code, v := a.rawCall(t, http.MethodDelete, "key-a", "/"+first.ID, ""); code != http.StatusForbidden || errorCode(v) != "OperationDenied.UnsupportedPhase" {
		t.Fatalf("DELETE of a cancelled task: %d %v", code, v)
	}
	// The cancelled task no longer holds the credential's place.
	second, err := a.client.Submit(ctx, credA, arkReq("second"))
	if err != nil {
		t.Fatalf("submit after the cancel: %v", err)
	}
	if code, _ := a.rawCall(t, http.MethodDelete, "key-b", "/"+second.ID, ""); code != http.StatusNotFound {
		t.Fatalf("DELETE with another credential: %d", code)
	}

	clk.advance(30 * time.Second)
	if err := a.client.Cancel(ctx, credA, second.ID); !errors.Is(err, upstream.ErrNotCancellable) {
		t.Fatalf("cancel of a running task: %v", err)
	}
	if code, v := a.rawCall(t, http.MethodDelete, "key-a", "/"+second.ID, ""); code != http.StatusForbidden || errorCode(v) != "OperationDenied.UnsupportedPhase" {
		t.Fatalf("DELETE of a running task: %d %v", code, v)
	}

	clk.advance(time.Minute)
	body, _, err := a.client.Download(ctx, credA, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	_ = body.Close()
	if err := a.client.Cancel(ctx, credA, second.ID); !errors.Is(err, upstream.ErrNotCancellable) {
		t.Fatalf("cancel of a succeeded task: %v", err)
	}
	if code, _ := a.rawCall(t, http.MethodDelete, "key-a", "/"+second.ID, ""); code != http.StatusOK {
		t.Fatalf("DELETE of a succeeded task: %d", code)
	}
	if _, err := a.client.Poll(ctx, credA, second.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("a deleted task: %v", err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*", second.ID+"*")); len(files) != 0 {
		t.Fatalf("a deleted task left %v", files)
	}
}

// TestArkExpiresAfter: execution_expires_after bounds a task; one still unfinished then ends expired.
func TestArkExpiresAfter(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Now()}
	a := startArk(t, sim.Config{Dir: t.TempDir(), Duration: 2 * time.Hour, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	bounded := arkReq("bounded")
	bounded.Expires = 10 * time.Minute // under Ark's minimum: sent as 3600
	st, err := a.client.Submit(ctx, credA, bounded)
	if err != nil {
		t.Fatal(err)
	}
	free, err := a.client.Submit(ctx, credA, arkReq("unbounded"))
	if err != nil {
		t.Fatal(err)
	}
	if v := a.rawTask(t, "key-a", st.ID); v["execution_expires_after"] != 3600.0 {
		t.Fatalf("execution_expires_after %v", v["execution_expires_after"])
	}
	if v := a.rawTask(t, "key-a", free.ID); v["execution_expires_after"] != 172800.0 {
		t.Fatalf("Ark's default execution_expires_after is 172800, got %v", v["execution_expires_after"])
	}
	clk.advance(time.Hour)
	if got := waitState(t, a.client, credA, st.ID, upstream.StateFailed); got.ErrorCode != "expired" {
		t.Fatalf("an expired task reads %+v", got)
	}
	if got, err := a.client.Poll(ctx, credA, free.ID); err != nil || got.State != upstream.StateInProgress {
		t.Fatalf("the unbounded task: %+v %v", got, err)
	}
	if code, v := a.rawCall(t, http.MethodPost, "key-a", "", `{"model":"dreamina-seedance-2-0-fast-260128","content":[{"type":"text","text":"x"}],"execution_expires_after":60}`); code != http.StatusBadRequest || errorCode(v) != "InvalidParameter" {
		t.Fatalf("execution_expires_after under 3600: %d %v", code, v)
	}
}

// TestArkRendered: a succeeded task reports what it rendered, and its last frame — the video's last
// frame, as a PNG of the video's size — when return_last_frame was asked; fetched without the credential.
func TestArkRendered(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{now: time.Now()}
	a := startArk(t, sim.Config{Dir: t.TempDir(), Duration: time.Minute, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	seed := int64(5)
	req := arkReq("rendered")
	req.Seed = &seed
	st, err := a.client.Submit(ctx, credA, req)
	if err != nil {
		t.Fatal(err)
	}
	// A task created without return_last_frame, as older clients send it.
	code, created := a.rawCall(t, http.MethodPost, "key-a", "", `{"model":"dreamina-seedance-2-0-fast-260128","content":[{"type":"text","text":"no last frame"}],"resolution":"480p","duration":4}`)
	if code != http.StatusOK {
		t.Fatalf("create: %d %v", code, created)
	}
	clk.advance(2 * time.Minute)
	done, err := a.client.Poll(ctx, credA, st.ID)
	want := upstream.Rendered{Seed: &seed, Resolution: "480p", Ratio: "16:9", Seconds: 4, FPS: 24, Size: "864x496"}
	if err != nil || done.State != upstream.StateCompleted || !reflect.DeepEqual(done.Rendered, want) {
		t.Fatalf("rendered %+v %v, want %+v", done, err, want)
	}
	body, contentType, _, err := a.client.DownloadLastFrame(ctx, credA, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(body)
	_ = body.Close()
	if err != nil || contentType != "image/png" || img.Bounds() != image.Rect(0, 0, 864, 496) {
		t.Fatalf("last frame %s %v: %v", contentType, img.Bounds(), err)
	}
	last, err := mp4synth.Frame(mp4synth.Params{Width: 864, Height: 496, Seconds: 4, FPS: 24, Seed: seed}, 4*24-1, 864, 496)
	if err != nil {
		t.Fatal(err)
	}
	first, err := mp4synth.Frame(mp4synth.Params{Width: 864, Height: 496, Seconds: 4, FPS: 24, Seed: seed}, 0, 864, 496)
	if err != nil {
		t.Fatal(err)
	}
	firstDiffers := false
	for y := range 496 {
		for x := range 864 {
			if color.RGBAModel.Convert(img.At(x, y)) != last.At(x, y) {
				t.Fatalf("pixel %d,%d is %v, the video's last frame has %v", x, y, img.At(x, y), last.At(x, y))
			}
			firstDiffers = firstDiffers || first.At(x, y) != last.At(x, y)
		}
	}
	if !firstDiffers {
		t.Fatal("the first and last frames are the same picture: this test could not tell them apart")
	}
	if _, _, _, err := a.client.DownloadLastFrame(ctx, credA, created["id"].(string)); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("last frame of a task that did not ask for one: %v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.fileAuth) != 1 || a.fileAuth[0] != "" {
		t.Fatalf("file URLs got Authorization %q", a.fileAuth)
	}
}
