package sim_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genai"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/gemini"
	"videogen/internal/domain/upstream/sim"
	"videogen/models"
)

// startGemini runs a simulator speaking the Gemini API behind a test server, with our adapter on it.
func startGemini(t *testing.T, concurrency int) (*sim.Sim, *httptest.Server, *gemini.Client) {
	t.Helper()
	s, err := sim.New(sim.Config{Dir: t.TempDir(), Protocol: sim.ProtocolGemini, Duration: 300 * time.Millisecond, Concurrency: concurrency,
		Secrets: []string{"key-a", "key-b"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs, gemini.New(hs.URL, 5*time.Second)
}

// TestGeminiSimulatorWithTheSDK drives the simulator with Google's own SDK, as the Gemini API's Veo
// page does: GenerateVideos, Operations.GetVideosOperation until done, Files.Download of the video.
func TestGeminiSimulatorWithTheSDK(t *testing.T) {
	ctx := context.Background()
	_, hs, _ := startGemini(t, 2)
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "key-a", Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: hs.URL + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	secs := int32(4)
	op, err := client.Models.GenerateVideosFromSource(ctx, "veo-3.1-fast-generate-preview", &genai.GenerateVideosSource{Prompt: "a kite over dunes"},
		&genai.GenerateVideosConfig{AspectRatio: "9:16", Resolution: "720p", DurationSeconds: &secs})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(op.Name, "models/veo-3.1-fast-generate-preview/operations/") || op.Done {
		t.Fatalf("operation %+v", op)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !op.Done && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if op, err = client.Operations.GetVideosOperation(ctx, op, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !op.Done || op.Error != nil || op.Response == nil || len(op.Response.GeneratedVideos) != 1 {
		t.Fatalf("finished operation %+v", op)
	}
	video, err := client.Files.Download(ctx, genai.NewDownloadURIFromGeneratedVideo(op.Response.GeneratedVideos[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := mp4SizeText(t, video); got != "720x1280" {
		t.Errorf("the video is %s, want 720x1280 (9:16 at 720p)", got)
	}

	// Another key does not see the operation; a wrong key is refused as the Gemini API refuses it.
	other, _ := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "key-b", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: hs.URL + "/"}})
	var ae genai.APIError
	if _, err := other.Operations.GetVideosOperation(ctx, op, nil); !errors.As(err, &ae) || ae.Code != 404 {
		t.Errorf("another key's poll: %v, want 404", err)
	}
	bad, _ := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "key-z", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: hs.URL + "/"}})
	if _, err := bad.Operations.GetVideosOperation(ctx, op, nil); !errors.As(err, &ae) || ae.Code != 400 || ae.Status != "INVALID_ARGUMENT" {
		t.Errorf("unknown key: %v, want 400 INVALID_ARGUMENT", err)
	}
	// What Veo does not take is refused: the SDK's own refusal of seed aside, a duration it does not render.
	secs = 5
	if _, err := client.Models.GenerateVideosFromSource(ctx, "veo-3.1-generate-preview", &genai.GenerateVideosSource{Prompt: "x"},
		&genai.GenerateVideosConfig{DurationSeconds: &secs}); !errors.As(err, &ae) || ae.Code != 400 {
		t.Errorf("5 seconds: %v, want 400", err)
	}
}

func geminiReq(prompt string) upstream.SubmitRequest {
	return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: prompt, Seconds: 4, Size: "1280x720", AspectRatio: "16:9"},
		UpstreamModel: "veo-3.1-generate-preview", UpstreamSize: "1280x720"}
}

func waitEnded(t *testing.T, c *gemini.Client, cred upstream.Credential, id string) upstream.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.Poll(context.Background(), cred, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == upstream.StateCompleted || st.State == upstream.StateFailed {
			return st
		}
		time.Sleep(30 * time.Millisecond)
	}
	t.Fatalf("operation %s did not end", id)
	return upstream.Status{}
}

// TestGeminiSimulatorWithTheAdapter: our adapter against the simulator — a first frame fetched from a
// media URL and sent inline, the video of the size asked, and each prompt directive answered as the
// Gemini API would.
func TestGeminiSimulatorWithTheAdapter(t *testing.T) {
	ctx := context.Background()
	s, _, c := startGemini(t, 3)
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9GtQAAAABJRU5ErkJggg==")
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}))
	t.Cleanup(media.Close)
	credA := upstream.Credential{ID: "a", Kind: "gemini", Secret: "key-a"}

	req := geminiReq("a tram in the rain")
	req.StartImageURL = media.URL + "/first.png"
	st, err := c.Submit(ctx, credA, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := waitEnded(t, c, credA, st.ID); st.State != upstream.StateCompleted {
		t.Fatalf("ended %+v", st)
	}
	body, _, err := c.Download(ctx, credA, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	video, _ := io.ReadAll(body)
	_ = body.Close()
	if got := mp4SizeText(t, video); got != "1280x720" {
		t.Errorf("video %s, want 1280x720", got)
	}
	if tasks := s.Tasks(); len(tasks) != 1 || tasks[0].InputBytes != int64(len(png)) || tasks[0].Media[0].Role != "first_frame" || tasks[0].Seconds != 4 {
		t.Errorf("simulated task %+v, want the first frame's %d bytes, 4 s", tasks, len(png))
	}

	t.Run("[sim:reject] is a rejection", func(t *testing.T) {
		var re *upstream.RejectedError
		if _, err := c.Submit(ctx, credA, geminiReq("x [sim:reject]")); !errors.As(err, &re) || re.Code != "INVALID_ARGUMENT" || re.Policy {
			t.Errorf("error %v", err)
		}
	})
	t.Run("[sim:fail] fails the operation", func(t *testing.T) {
		st, err := c.Submit(ctx, credA, geminiReq("x [sim:fail]"))
		if err != nil {
			t.Fatal(err)
		}
		if st := waitEnded(t, c, credA, st.ID); st.State != upstream.StateFailed || st.PolicyFailure || st.ErrorCode != "INTERNAL" {
			t.Errorf("ended %+v", st)
		}
	})
	t.Run("[sim:policy] is filtered output", func(t *testing.T) {
		st, err := c.Submit(ctx, credA, geminiReq("x [sim:policy]"))
		if err != nil {
			t.Fatal(err)
		}
		if st := waitEnded(t, c, credA, st.ID); st.State != upstream.StateFailed || !st.PolicyFailure {
			t.Errorf("ended %+v", st)
		}
	})
	t.Run("a model the API does not serve is the route's fault", func(t *testing.T) {
		r := geminiReq("x")
		r.UpstreamModel = "sora-2"
		if _, err := c.Submit(ctx, credA, r); !errors.Is(err, upstream.ErrRoute) {
			t.Errorf("error %v, want ErrRoute", err)
		}
	})
	t.Run("an unknown operation", func(t *testing.T) {
		if _, err := c.Poll(ctx, credA, "models/veo-3.1-generate-preview/operations/nosuch"); !errors.Is(err, upstream.ErrUnknownTask) {
			t.Errorf("error %v, want ErrUnknownTask", err)
		}
	})
	t.Run("a full credential is busy for the second the simulator asks", func(t *testing.T) {
		credB := upstream.Credential{ID: "b", Kind: "gemini", Secret: "key-b"}
		for i := range 3 {
			if _, err := c.Submit(ctx, credB, geminiReq(fmt.Sprintf("slow %d [sim:slow]", i))); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.Submit(ctx, credB, geminiReq("one more"))
		if !errors.Is(err, upstream.ErrBusy) || upstream.RetryAfter(err) != time.Second {
			t.Errorf("error %v (retry after %s), want busy for 1s", err, upstream.RetryAfter(err))
		}
	})
	t.Run("[sim:5xx-once] answers 503 after starting an operation; the retry starts another", func(t *testing.T) {
		before := len(s.Tasks())
		if _, err := c.Submit(ctx, credA, geminiReq("lost [sim:5xx-once]")); !errors.Is(err, upstream.ErrTransient) {
			t.Fatalf("first: %v, want transient", err)
		}
		if _, err := c.Submit(ctx, credA, geminiReq("lost [sim:5xx-once]")); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if n := len(s.Tasks()) - before; n != 2 {
			t.Errorf("%d operations, want 2 (no idempotency key on the Gemini API)", n)
		}
	})
	t.Run("[sim:401] revokes the key until reinstated", func(t *testing.T) {
		if _, err := c.Submit(ctx, credA, geminiReq("x [sim:401]")); !errors.Is(err, upstream.ErrAuth) || strings.Contains(err.Error(), "key-a") {
			t.Fatalf("error %v, want ErrAuth without the key", err)
		}
		if _, err := c.Poll(ctx, credA, st.ID); !errors.Is(err, upstream.ErrAuth) {
			t.Errorf("poll with the revoked key: %v", err)
		}
		s.Reinstate()
		if _, err := c.Submit(ctx, credA, geminiReq("x [sim:401]")); err != nil {
			t.Errorf("after reinstating: %v", err)
		}
	})
}

// TestGeminiSimulatorRefusesUnknownFields: like the Gemini API, the simulator refuses a field Veo does
// not take, so an adapter that sends one (a seed, generateAudio) fails in tests.
func TestGeminiSimulatorRefusesUnknownFields(t *testing.T) {
	_, hs, _ := startGemini(t, 2)
	for _, body := range []string{
		`{"instances":[{"prompt":"x"}],"parameters":{"seed":42}}`,
		`{"instances":[{"prompt":"x"}],"parameters":{"generateAudio":true}}`,
		`{"instances":[{"prompt":"x","image":{"gcsUri":"gs://b/o.png"}}]}`,
	} {
		r, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1beta/models/veo-3.1-generate-preview:predictLongRunning", strings.NewReader(body))
		r.Header.Set("x-goog-api-key", "key-a")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", body, resp.StatusCode)
		}
	}
}

// mp4SizeText is the video's size as "WxH".
func mp4SizeText(t *testing.T, b []byte) string {
	w, h := mp4Size(t, b)
	return fmt.Sprintf("%dx%d", w, h)
}
