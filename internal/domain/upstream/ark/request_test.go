package ark_test

import (
	"context"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/models"
)

// The create request's schema: BytePlus ModelArk "Create a video generation task"
// (docs.byteplus.com/en/docs/ModelArk/1520757; the ranges as docs/upstreams.md#ark records them) and
// the fields of the Ark SDK's CreateContentGenerationTaskRequest (volcengine-go-sdk v1.2.49,
// service/arkruntime/model/content_generation.go), read 2026-11-26.
var (
	createFields = []string{"model", "content", "safety_identifier", "callback_url", "return_last_frame", "service_tier",
		"execution_expires_after", "priority", "generate_audio", "draft", "camera_fixed", "watermark", "seed", "resolution",
		"ratio", "output_format", "omni_reference_task_type", "duration", "frames", "tools"}
	resolutions = []string{"480p", "720p", "1080p"}
	ratios      = []string{"16:9", "4:3", "1:1", "3:4", "9:16", "21:9", "adaptive"}
	// Each content item type with the roles it may carry ("" for text, which has none).
	itemRoles = map[string][]string{
		"text":      {""},
		"image_url": {"first_frame", "last_frame", "reference_image"},
		"video_url": {"reference_video"},
		"audio_url": {"reference_audio"},
	}
)

// checkCreateSchema fails the test for any part of body the documented request schema does not allow.
func checkCreateSchema(t *testing.T, body map[string]any) {
	t.Helper()
	for k := range body {
		if !slices.Contains(createFields, k) {
			t.Errorf("field %q is not in Ark's create request", k)
		}
	}
	if m, ok := body["model"].(string); !ok || m == "" {
		t.Errorf("model %v: a non-empty string is required", body["model"])
	}
	items, ok := body["content"].([]any)
	if !ok || len(items) == 0 {
		t.Errorf("content %v: a non-empty array is required", body["content"])
	}
	for i, it := range items {
		item, _ := it.(map[string]any)
		typ, _ := item["type"].(string)
		role, _ := item["role"].(string)
		roles, ok := itemRoles[typ]
		if !ok || !slices.Contains(roles, role) {
			t.Errorf("content[%d]: type %q with role %q", i, typ, role)
			continue
		}
		if typ == "text" {
			if s, ok := item["text"].(string); !ok || s == "" {
				t.Errorf("content[%d]: text %v", i, item["text"])
			}
			continue
		}
		if u, _ := item[typ].(map[string]any); u == nil || u["url"] == "" || len(item) != 3 {
			t.Errorf("content[%d]: %v, want {type, %s: {url}, role}", i, item, typ)
		}
	}
	integer := func(k string, lo, hi float64) {
		v, ok := body[k]
		if !ok {
			return
		}
		f, isNum := v.(float64)
		if !isNum || f != math.Trunc(f) || f < lo || f > hi {
			t.Errorf("%s %v: an integer in [%v, %v] is required", k, v, lo, hi)
		}
	}
	integer("duration", 4, 15) // Seedance 2.0: 4 to 15 seconds
	integer("seed", -1, math.MaxUint32)
	integer("execution_expires_after", 3600, 259200)
	for _, k := range []string{"generate_audio", "watermark", "return_last_frame"} {
		if v, ok := body[k]; ok {
			if _, isBool := v.(bool); !isBool {
				t.Errorf("%s %v: a boolean is required", k, v)
			}
		}
	}
	if r, ok := body["resolution"]; ok && !slices.Contains(resolutions, r.(string)) {
		t.Errorf("resolution %v", r)
	}
	if r, ok := body["ratio"]; ok && !slices.Contains(ratios, r.(string)) {
		t.Errorf("ratio %v", r)
	}
}

type createCase struct {
	name string
	req  upstream.SubmitRequest
	want map[string]any // the fields this case is about; absent: nil
}

func createCases() []createCase {
	seed0, seedMax := int64(0), int64(math.MaxUint32)
	base := func(alias string, seconds int, size string) upstream.SubmitRequest {
		return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: alias, Prompt: "a harbour at dawn", Seconds: seconds, Size: size},
			UpstreamModel: "dreamina-seedance-2-0-260128", IdempotencyKey: "k"}
	}
	frame := base("videogen-2.0-720p", 5, "")
	frame.StartImageURL = "https://m/first.png"
	frames := base("videogen-2.0-720p", 8, "720x1280")
	frames.AspectRatio, frames.StartImageURL, frames.EndImageURL = "9:16", "https://m/first.png", "https://m/last.png"
	mapped := base("videogen-2.0-720p", 4, "960x960")
	mapped.AspectRatio, mapped.UpstreamSize = "1:1", "1280x720"
	short := base("videogen-2.0-1080p", 15, "1920x1080")
	short.Expires = 10 * time.Minute
	long := base("videogen-2.0-480p", 6, "864x496")
	long.Expires = 100 * time.Hour
	odd := base("videogen-2.0-480p", 6, "864x496")
	odd.Expires, odd.Seed = 90*time.Minute+500*time.Millisecond, &seed0
	maxSeed := base("videogen-2.0-fast-720p", 12, "1470x630")
	maxSeed.Seed, maxSeed.GenerateAudio, maxSeed.Watermark = &seedMax, true, true
	maxSeed.ImageURLs, maxSeed.VideoURLs, maxSeed.AudioURLs = []string{"https://m/a.png", "https://m/b.png"}, []string{"https://m/v.mp4"}, []string{"https://m/s.mp3"}
	return []createCase{
		{"text, size from the catalog", base("videogen-2.0-720p", 5, "1280x720"),
			map[string]any{"resolution": "720p", "ratio": "16:9", "duration": 5.0, "return_last_frame": true, "execution_expires_after": nil, "seed": nil}},
		// Ark's default ratio with a first frame is "adaptive"; ours stays 16:9.
		{"first frame, no ratio", frame, map[string]any{"ratio": "16:9", "resolution": "720p"}},
		{"first and last frames, portrait", frames, map[string]any{"ratio": "9:16", "resolution": "720p", "duration": 8.0}},
		// A route's size map: 960x960 sold, 1280x720 rendered; the ratio follows what is sent.
		{"mapped size", mapped, map[string]any{"ratio": "16:9", "resolution": "720p"}},
		{"run timeout under Ark's minimum", short, map[string]any{"execution_expires_after": 3600.0, "resolution": "1080p", "duration": 15.0}},
		{"run timeout over Ark's maximum", long, map[string]any{"execution_expires_after": 259200.0, "resolution": "480p"}},
		{"run timeout rounded up to a second", odd, map[string]any{"execution_expires_after": 5401.0, "seed": 0.0}},
		{"references, audio, watermark, largest seed", maxSeed,
			map[string]any{"seed": float64(math.MaxUint32), "generate_audio": true, "watermark": true, "ratio": "21:9", "resolution": "720p"}},
	}
}

// captureCreate submits req to a recorder and returns the body the adapter sent.
func captureCreate(t *testing.T, req upstream.SubmitRequest) string {
	t.Helper()
	p, c := serve(t, map[string]answer{"POST " + tasks: okAnswer(`{"id":"cgt-1"}`)})
	if _, err := c.Submit(context.Background(), cred, req); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bodies) != 1 {
		t.Fatalf("%d requests", len(p.bodies))
	}
	return p.bodies[0]
}

// TestCreateRequests: for a table of creates, the body sent is within Ark's documented request schema
// and carries the fields each case is about.
func TestCreateRequests(t *testing.T) {
	for _, tc := range createCases() {
		t.Run(tc.name, func(t *testing.T) {
			var body map[string]any
			if err := json.Unmarshal([]byte(captureCreate(t, tc.req)), &body); err != nil {
				t.Fatal(err)
			}
			checkCreateSchema(t, body)
			for k, want := range tc.want {
				if got, ok := body[k]; (want == nil && ok) || (want != nil && !reflect.DeepEqual(got, want)) {
					t.Errorf("%s = %v, want %v", k, got, want)
				}
			}
			// Always: the customer's choices and the last frame.
			for _, k := range []string{"generate_audio", "watermark", "return_last_frame", "ratio", "resolution", "duration"} {
				if _, ok := body[k]; !ok {
					t.Errorf("%s is not sent", k)
				}
			}
		})
	}
}
