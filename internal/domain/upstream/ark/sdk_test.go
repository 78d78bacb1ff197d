package ark_test

// The adapter is hand-written rather than built on Ark's Go SDK (docs/decisions.md, "The Ark adapter
// stays hand-written"). These tests hold it to the SDK's own request and answer types:
// github.com/volcengine/volcengine-go-sdk v1.2.49 (2026-08-21), service/arkruntime/model/
// content_generation.go (CreateContentGenerationTaskRequest, GetContentGenerationTaskResponse) and
// service/arkruntime/content_generation.go (the create, get and delete calls). The SDK is a test
// dependency only.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/volcengine/volcengine-go-sdk/service/arkruntime"
	"github.com/volcengine/volcengine-go-sdk/service/arkruntime/model"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/testkit"
	"videogen/models"
)

// clock is a settable time for the simulator, so a test decides when a task is queued, running or done.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// arkSimulator starts the simulator's Ark protocol; tasks take a minute, queued for the first 6 s.
func arkSimulator(t *testing.T, clk *clock) string {
	t.Helper()
	s, err := sim.New(sim.Config{Dir: t.TempDir(), Protocol: sim.ProtocolArk, Duration: time.Minute, Concurrency: 4,
		Secrets: []string{secret}, Now: clk.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL + "/api/v3"
}

// TestSDKAgainstSimulator: the SDK's own client creates, reads and deletes tasks on the simulator's
// Ark protocol, and the adapter reads the same tasks — so the simulator the adapter is tested against
// speaks what the SDK speaks.
func TestSDKAgainstSimulator(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Now()}
	base := arkSimulator(t, clk)
	m := testkit.ProviderMedia(t)
	// No SDK retries: Ark has no idempotency key, so a retried create may be a second paid task.
	sdk := arkruntime.NewClientWithApiKey(secret, arkruntime.WithBaseUrl(base), arkruntime.WithRetryTimes(0))
	c := ark.New(base, 5*time.Second)

	str := func(s string) *string { return &s }
	created, err := sdk.CreateContentGenerationTask(ctx, model.CreateContentGenerationTaskRequest{
		Model: "dreamina-seedance-2-0-260128",
		Content: []*model.CreateContentGenerationContentItem{
			{Type: model.ContentGenerationContentItemTypeText, Text: str("a harbour at dawn")},
			{Type: model.ContentGenerationContentItemTypeImage, ImageURL: &model.ImageURL{URL: m + "/r.png"}, Role: str("reference_image")},
			{Type: model.ContentGenerationContentItemTypeVideo, VideoURL: &model.VideoUrl{Url: m + "/v.mp4"}, Role: str("reference_video")},
			{Type: model.ContentGenerationContentItemTypeAudio, AudioURL: &model.AudioUrl{Url: m + "/a.mp3"}, Role: str("reference_audio")},
		},
		Resolution: str("720p"), Ratio: str("1:1"), Duration: ptr(int64(5)), GenerateAudio: ptr(false), Watermark: ptr(true),
		Seed: ptr(int64(7)), ReturnLastFrame: ptr(true), ExecutionExpiresAfter: ptr(int64(3600)),
	})
	if err != nil || !strings.HasPrefix(created.ID, "cgt-") {
		t.Fatalf("SDK create: %+v %v", created, err)
	}
	got, err := sdk.GetContentGenerationTask(ctx, model.GetContentGenerationTaskRequest{ID: created.ID})
	if err != nil || got.Status != model.StatusQueued || *got.Resolution != "720p" || *got.Ratio != "1:1" || *got.Duration != 5 ||
		*got.Seed != 7 || *got.ExecutionExpiresAfter != 3600 || *got.GenerateAudio || *got.FramesPerSecond != 24 {
		t.Fatalf("SDK get: %+v %v", got, err)
	}
	if st, err := c.Poll(ctx, cred, created.ID); err != nil || st.State != upstream.StateQueued {
		t.Fatalf("adapter poll of the SDK's task: %+v %v", st, err)
	}

	// DELETE of a queued task cancels it (BytePlus ModelArk "Cancel or delete a video generation task":
	// queued → cancelled).
	if err := sdk.DeleteContentGenerationTask(ctx, model.DeleteContentGenerationTaskRequest{ID: created.ID}); err != nil {
		t.Fatalf("SDK delete of a queued task: %v", err)
	}
	if got, err := sdk.GetContentGenerationTask(ctx, model.GetContentGenerationTaskRequest{ID: created.ID}); err != nil || got.Status != model.StatusCancelled {
		t.Fatalf("after the SDK's delete: %+v %v", got, err)
	}
	if st, err := c.Poll(ctx, cred, created.ID); err != nil || st.State != upstream.StateFailed || st.ErrorCode != "cancelled" {
		t.Fatalf("adapter poll of a cancelled task: %+v %v", st, err)
	}

	// A task the adapter created, read by the SDK once it runs and once it succeeded.
	seed := int64(11)
	mine, err := c.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-480p", Prompt: "a lighthouse",
		Seconds: 4, Size: "864x496", Seed: &seed}, UpstreamModel: "dreamina-seedance-2-0-fast-260128", Expires: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(30 * time.Second)
	// A running task cannot be deleted: the SDK gets Ark's refusal, the adapter ErrNotCancellable.
	var apiErr *model.APIError
	if err := sdk.DeleteContentGenerationTask(ctx, model.DeleteContentGenerationTaskRequest{ID: mine.ID}); !errors.As(err, &apiErr) ||
		apiErr.HTTPStatusCode != http.StatusForbidden || apiErr.Code != "OperationDenied.UnsupportedPhase" {
		t.Fatalf("SDK delete of a running task: %v", err)
	}
	if err := c.Cancel(ctx, cred, mine.ID); !errors.Is(err, upstream.ErrNotCancellable) || errors.Is(err, upstream.ErrAuth) {
		t.Fatalf("adapter cancel of a running task: %v", err)
	}
	clk.advance(time.Minute)
	got, err = sdk.GetContentGenerationTask(ctx, model.GetContentGenerationTaskRequest{ID: mine.ID})
	if err != nil || got.Status != model.StatusSucceeded || got.Content.VideoURL == "" || got.Content.LastFrameURL == "" ||
		*got.ExecutionExpiresAfter != 7200 || got.Usage.CompletionTokens == 0 {
		t.Fatalf("SDK get of a succeeded task: %+v %v", got, err)
	}
	st, err := c.Poll(ctx, cred, mine.ID)
	want := upstream.Rendered{Seed: got.Seed, Resolution: *got.Resolution, Ratio: *got.Ratio, Seconds: float64(*got.Duration),
		FPS: int(*got.FramesPerSecond), Size: "864x496"}
	if err != nil || !reflect.DeepEqual(st.Rendered, want) || *st.Rendered.Seed != 11 || st.Usage.CompletionTokens != int64(got.Usage.CompletionTokens) {
		t.Fatalf("adapter's rendered %+v (%v), the SDK read %+v", st, err, got)
	}
	// DELETE of a finished task deletes its record ("no longer queryable").
	if err := sdk.DeleteContentGenerationTask(ctx, model.DeleteContentGenerationTaskRequest{ID: mine.ID}); err != nil {
		t.Fatalf("SDK delete of a succeeded task: %v", err)
	}
	if _, err := c.Poll(ctx, cred, mine.ID); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("poll of a deleted task: %v", err)
	}
}

// TestSDKAnswerTypes: an answer the SDK's GetContentGenerationTaskResponse encodes, every field set,
// is read by the adapter as the SDK means it; and the last frame is fetched from its
// content.last_frame_url without the credential.
func TestSDKAnswerTypes(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var storageAuth []string
	frame := pngBytes(t, 8, 6)
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		storageAuth = append(storageAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, ".png") {
			// TOS may label objects application/octet-stream: the adapter reads the type from the bytes.
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(frame)
			return
		}
		_, _ = io.WriteString(w, "mp4!")
	}))
	defer storage.Close()

	str := func(s string) *string { return &s }
	full := model.GetContentGenerationTaskResponse{
		ID: "cgt-20260901090931-abcde", Model: "dreamina-seedance-2-0-260128", SafetyIdentifier: str("user-1"), Status: model.StatusSucceeded,
		Content: model.Content{VideoURL: storage.URL + "/v.mp4?X-Tos-Signature=sig", LastFrameURL: storage.URL + "/f.png?X-Tos-Signature=sig", FileURL: ""},
		Usage:   model.Usage{CompletionTokens: 246016, TotalTokens: 246016}, SubdivisionLevel: str(""), FileFormat: str("mp4"),
		Frames: ptr(int64(121)), FramesPerSecond: ptr(int64(24)), Resolution: str("1080p"), Ratio: str("9:16"), OutputFormat: str("mp4"),
		Duration: ptr(int64(5)), CreatedAt: 1788253659, UpdatedAt: 1788253771, Seed: ptr(int64(4294967295)), RevisedPrompt: str("a harbour"),
		ServiceTier: str("default"), ExecutionExpiresAfter: ptr(int64(172800)), Priority: ptr(int32(0)), GenerateAudio: ptr(true),
		Draft: ptr(false), DraftTaskID: str(""),
	}
	failed := model.GetContentGenerationTaskResponse{ID: "cgt-2", Status: model.StatusFailed,
		Error: &model.ContentGenerationError{Code: "OutputVideoSensitiveContentDetected", Message: "The request failed because the output video may contain sensitive information."}}
	encode := func(v model.GetContentGenerationTaskResponse) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	p, c := serve(t, map[string]answer{
		"GET " + tasks + "/cgt-1": okAnswer(encode(full)),
		"GET " + tasks + "/cgt-2": okAnswer(encode(failed)),
	})
	st, err := c.Poll(ctx, cred, "cgt-1")
	want := upstream.Status{ID: full.ID, State: upstream.StateCompleted, Progress: 100, Usage: upstream.Usage{CompletionTokens: 246016, TotalTokens: 246016},
		Rendered: upstream.Rendered{Seed: ptr(int64(4294967295)), Resolution: "1080p", Ratio: "9:16", Seconds: 5, FPS: 24, Size: "1080x1920"}}
	if err != nil || !reflect.DeepEqual(st, want) {
		t.Fatalf("poll\n got %+v %v\nwant %+v", st, err, want)
	}
	st, err = c.Poll(ctx, cred, "cgt-2")
	if err != nil || st.State != upstream.StateFailed || st.ErrorCode != failed.Error.Code || st.ErrorMessage != failed.Error.Message || !st.PolicyFailure {
		t.Fatalf("failed task %+v %v", st, err)
	}

	body, contentType, _, err := c.DownloadLastFrame(ctx, cred, "cgt-1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	_ = body.Close()
	if contentType != "image/png" || !bytes.Equal(b, frame) {
		t.Fatalf("last frame %s, %d bytes", contentType, len(b))
	}
	video, _, err := c.Download(ctx, cred, "cgt-1")
	if err != nil {
		t.Fatal(err)
	}
	_ = video.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(storageAuth) != 2 || storageAuth[0] != "" || storageAuth[1] != "" {
		t.Fatalf("object storage got Authorization %q", storageAuth)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.headers {
		if h.Get("Authorization") != "Bearer "+secret {
			t.Fatalf("Ark's API got Authorization %q", h.Get("Authorization"))
		}
	}
}

// TestSDKRequestTypes: every create body the adapter sends decodes into the SDK's
// CreateContentGenerationTaskRequest with no field the SDK does not know, and encodes back to the same
// JSON: the fields we send are the SDK's, with its types.
func TestSDKRequestTypes(t *testing.T) {
	for _, tc := range createCases() {
		t.Run(tc.name, func(t *testing.T) {
			body := captureCreate(t, tc.req)
			dec := json.NewDecoder(strings.NewReader(body))
			dec.DisallowUnknownFields()
			var req model.CreateContentGenerationTaskRequest
			if err := dec.Decode(&req); err != nil {
				t.Fatalf("the SDK's request type cannot hold %s: %v", body, err)
			}
			back, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			var sent, again map[string]any
			_ = json.Unmarshal([]byte(body), &sent)
			_ = json.Unmarshal(back, &again)
			if !reflect.DeepEqual(sent, again) {
				t.Fatalf("round trip through the SDK's type\nsent %s\n got %s", body, back)
			}
		})
	}
}

func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
