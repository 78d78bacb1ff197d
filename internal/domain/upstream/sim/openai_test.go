package sim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/openai"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/testkit"
	"videogen/models"
)

// openaiSpec is OpenAI's Videos API as published, kept beside the adapter (its README gives the source
// commit and date): the simulator's answers are held to its schemas.
func openaiSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile("../openai/testdata/openapi-videos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func conforms(t *testing.T, doc *openapi3.T, schema string, body []byte) {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: not JSON: %s", schema, body)
	}
	if err := doc.Components.Schemas[schema].Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		t.Fatalf("the simulator's answer is not OpenAI's %s: %v\n%s", schema, err, body)
	}
}

func startOpenAI(t *testing.T, duration time.Duration) (*sim.Sim, string) {
	t.Helper()
	s, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: duration, Concurrency: 4, Secrets: []string{"key-a", "key-b"}, Protocol: sim.ProtocolOpenAI,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// mp4Size reads the width and height of an MP4's video track (tkhd, ISO/IEC 14496-12 8.3.2).
func mp4Size(t *testing.T, b []byte) (int, int) {
	t.Helper()
	i := bytes.Index(b, []byte("tkhd"))
	if i < 0 {
		t.Fatal("no tkhd box: not an MP4")
	}
	p := i + 4
	skip := 4 + 4 + 4 + 4 + 4 + 4 + 8 // version/flags, times, track id, reserved, duration, reserved
	if b[p] == 1 {
		skip += 12 // 64-bit times and duration
	}
	p += skip + 2 + 2 + 2 + 2 + 36 // layer, alternate group, volume, reserved, matrix
	return int(binary.BigEndian.Uint32(b[p:]) >> 16), int(binary.BigEndian.Uint32(b[p+4:]) >> 16)
}

// TestOpenAISDKAgainstSimulator drives the simulator's openai protocol with OpenAI's own Go SDK, as a
// customer of OpenAI would: create (the SDK's multipart form, a first frame as input_reference), poll
// to completion, download the video and its thumbnail. Every answer is a VideoResource as the spec has
// it, and the video has the size asked for.
func TestOpenAISDKAgainstSimulator(t *testing.T) {
	ctx := context.Background()
	doc := openaiSpec(t)
	s, base := startOpenAI(t, 300*time.Millisecond)
	client := sdk.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("key-a"), option.WithMaxRetries(0))
	frame := make([]byte, 10_000)
	_, _ = rand.Read(frame)
	var raw *http.Response
	v, err := client.Videos.New(ctx, sdk.VideoNewParams{Prompt: "a lighthouse at dusk", Model: sdk.VideoModelSora2Pro,
		Seconds: sdk.VideoSeconds8, Size: sdk.VideoSize1024x1792,
		InputReference: sdk.VideoNewParamsInputReferenceUnion{OfFile: sdk.File(bytes.NewReader(frame), "first.png", "image/png")}},
		option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != sdk.VideoStatusQueued || v.Model != sdk.VideoModelSora2Pro || v.Seconds != "8" || v.Size != sdk.VideoSize1024x1792 || !strings.HasPrefix(v.ID, "video_") {
		t.Fatalf("created %+v", v)
	}
	conforms(t, doc, "VideoResource", []byte(v.RawJSON()))
	deadline := time.Now().Add(10 * time.Second)
	for v.Status != sdk.VideoStatusCompleted {
		if time.Now().After(deadline) || v.Status == sdk.VideoStatusFailed {
			t.Fatalf("video %+v", v)
		}
		time.Sleep(50 * time.Millisecond)
		if v, err = client.Videos.Get(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
		conforms(t, doc, "VideoResource", []byte(v.RawJSON()))
	}
	if v.Progress != 100 || v.CompletedAt == 0 || v.ExpiresAt <= v.CompletedAt {
		t.Fatalf("completed video %+v", v)
	}
	resp, err := client.Videos.DownloadContent(ctx, v.ID, sdk.VideoDownloadContentParams{})
	if err != nil {
		t.Fatal(err)
	}
	video, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if w, h := mp4Size(t, video); resp.Header.Get("Content-Type") != "video/mp4" || w != 1024 || h != 1792 {
		t.Fatalf("video %s %dx%d, want video/mp4 1024x1792", resp.Header.Get("Content-Type"), w, h)
	}
	resp, err = client.Videos.DownloadContent(ctx, v.ID, sdk.VideoDownloadContentParams{Variant: sdk.VideoDownloadContentParamsVariantThumbnail})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	sum := sha256.Sum256(frame)
	tasks := s.Tasks()
	if len(tasks) != 1 || tasks[0].InputReference == nil || tasks[0].InputReference.SHA256 != hex.EncodeToString(sum[:]) ||
		tasks[0].InputReference.ContentType != "image/png" || tasks[0].Seconds != 8 || tasks[0].Model != "sora-2-pro" {
		t.Fatalf("the simulator's task %+v", tasks)
	}

	// A job of another key is unknown, answered as OpenAI answers: 404, ErrorResponse.
	other := sdk.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("key-b"), option.WithMaxRetries(0))
	_, err = other.Videos.Get(ctx, v.ID)
	var apiErr *sdk.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type != "invalid_request_error" {
		t.Fatalf("another key's job: %v", err)
	}
}

// TestOpenAIAdapterAgainstSimulator: the openai adapter and the simulator's openai protocol agree on a
// whole task — text alone as JSON, a first frame streamed as input_reference from a media URL — and the
// simulator renders the size asked for; the adapter's Rendered reports it.
func TestOpenAIAdapterAgainstSimulator(t *testing.T) {
	ctx := context.Background()
	s, base := startOpenAI(t, 300*time.Millisecond)
	frame := testkit.PNG(t, 720, 1280)
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(frame)
	}))
	defer store.Close()
	c := openai.New(base, 5*time.Second)
	cred := upstream.Credential{ID: "oai", Kind: "openai", Secret: "key-a"}
	for _, tc := range []struct {
		name, size, firstFrame string
		seconds                int
	}{
		{"text", "1280x720", "", 4},
		{"first frame", "720x1280", store.URL + "/first.png", 4},
		// Another size than the video's: the adapter crops it to 1280x720, which Sora (and so the
		// simulator) takes; sent as it is, it would be refused.
		{"first frame cropped", "1280x720", store.URL + "/first.png", 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "adapter " + tc.name, Seconds: tc.seconds,
				Size: tc.size, AspectRatio: "16:9", Watermark: true, TaskInputs: models.TaskInputs{StartImageURL: tc.firstFrame}},
				UpstreamModel: "sora-2", UpstreamSize: tc.size, IdempotencyKey: "k-" + tc.name}
			st, err := c.Submit(ctx, cred, req)
			if err != nil {
				t.Fatal(err)
			}
			// The same key finds the same job.
			if again, err := c.Submit(ctx, cred, req); err != nil || again.ID != st.ID {
				t.Fatalf("repeated submit: %+v %v, want %s", again, err, st.ID)
			}
			deadline := time.Now().Add(10 * time.Second)
			for st.State != upstream.StateCompleted {
				if time.Now().After(deadline) || st.State == upstream.StateFailed {
					t.Fatalf("status %+v", st)
				}
				time.Sleep(50 * time.Millisecond)
				if st, err = c.Poll(ctx, cred, st.ID); err != nil {
					t.Fatal(err)
				}
			}
			if st.Rendered.Size != tc.size || st.Rendered.Seconds != float64(tc.seconds) {
				t.Fatalf("rendered %+v", st.Rendered)
			}
			body, _, err := c.Download(ctx, cred, st.ID)
			if err != nil {
				t.Fatal(err)
			}
			video, _ := io.ReadAll(body)
			_ = body.Close()
			var wantW, wantH int
			_, _ = fmt.Sscanf(tc.size, "%dx%d", &wantW, &wantH)
			if w, h := mp4Size(t, video); w != wantW || h != wantH {
				t.Fatalf("video %dx%d, want %s", w, h, tc.size)
			}
		})
	}
	var withFrame *sim.Task
	for _, task := range s.Tasks() {
		if task.Prompt == "adapter first frame" {
			withFrame = &task
		}
	}
	if withFrame == nil || withFrame.InputReference == nil || withFrame.InputReference.Bytes != int64(len(frame)) || withFrame.InputReference.Filename != "first_frame.png" {
		t.Fatalf("the first frame did not reach the simulator as input_reference: %+v", withFrame)
	}
}

// TestOpenAISimulatorRefuses: the simulator refuses what OpenAI refuses, in OpenAI's error shape
// (ErrorResponse): fields the spec does not have, seconds and sizes outside its enums, seconds sent as a
// number, a missing prompt, a non-image input_reference.
func TestOpenAISimulatorRefuses(t *testing.T) {
	doc := openaiSpec(t)
	_, base := startOpenAI(t, time.Second)
	form := func(fields map[string]string, file string) (string, []byte) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		for k, v := range fields {
			_ = mw.WriteField(k, v)
		}
		if file != "" {
			h := make(map[string][]string)
			h["Content-Disposition"] = []string{`form-data; name="input_reference"; filename="x"`}
			h["Content-Type"] = []string{file}
			w, _ := mw.CreatePart(h)
			_, _ = w.Write([]byte("not really an image"))
		}
		_ = mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
	cases := []struct {
		name, ctype, body, code, param string
	}{
		{"aspect_ratio", "application/json", `{"prompt":"x","aspect_ratio":"16:9"}`, "unknown_parameter", "aspect_ratio"},
		{"generate_audio", "application/json", `{"prompt":"x","generate_audio":false}`, "unknown_parameter", "generate_audio"},
		{"seed", "application/json", `{"prompt":"x","seed":42}`, "unknown_parameter", "seed"},
		{"start_image_url", "application/json", `{"prompt":"x","start_image_url":"https://m/f.png"}`, "unknown_parameter", "start_image_url"},
		{"5 seconds", "application/json", `{"prompt":"x","seconds":"5"}`, "invalid_value", "seconds"},
		{"seconds as a number", "application/json", `{"prompt":"x","seconds":4}`, "invalid_type", "seconds"},
		{"a size outside the enum", "application/json", `{"prompt":"x","size":"960x960"}`, "invalid_value", "size"},
		{"no prompt", "application/json", `{"seconds":"4"}`, "missing_required_parameter", "prompt"},
		{"form: watermark", "", "watermark", "unknown_parameter", "watermark"},
		{"form: 10 seconds", "", "seconds=10", "invalid_value", "seconds"},
		{"form: a text file as input_reference", "", "file=text/plain", "invalid_value", "input_reference"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctype, body := tc.ctype, []byte(tc.body)
			if ctype == "" {
				fields := map[string]string{"prompt": "x"}
				file := ""
				switch k, v, _ := strings.Cut(tc.body, "="); k {
				case "file":
					file = v
				case "seconds":
					fields["seconds"] = v
				default:
					fields[k] = "true"
				}
				ctype, body = form(fields, file)
			}
			r, _ := http.NewRequest("POST", base+"/v1/videos", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer key-a")
			r.Header.Set("Content-Type", ctype)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != 400 {
				t.Fatalf("%d %s, want 400", resp.StatusCode, b)
			}
			conforms(t, doc, "ErrorResponse", b)
			var e struct {
				Error struct{ Code, Param, Type, Message string }
			}
			_ = json.Unmarshal(b, &e)
			if e.Error.Code != tc.code || e.Error.Param != tc.param || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
				t.Fatalf("refusal %s, want code %s param %s", b, tc.code, tc.param)
			}
		})
	}
}
