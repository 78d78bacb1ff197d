package sim_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/internal/testkit"
)

// call sends one request to a simulator and returns its status and its error code (in each provider's
// shape: OpenAI's and Ark's error.code, Gemini's error.status).
func call(t *testing.T, method, url string, header http.Header, body io.Reader) (int, string) {
	t.Helper()
	r, _ := http.NewRequest(method, url, body)
	r.Header = header
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Error struct {
			Code   any    `json:"code"`
			Status string `json:"status"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&v)
	if v.Error.Status != "" {
		return resp.StatusCode, v.Error.Status
	}
	return resp.StatusCode, fmt.Sprint(v.Error.Code)
}

// TestSimulatorsRefuseWhatTheProvidersRefuse: each simulator reads its provider's capability table and
// refuses what the provider refuses, as the provider answers: a model it does not list, a duration or size
// outside its row, inputs its row does not take or breaks the limits of.
func TestSimulatorsRefuseWhatTheProvidersRefuse(t *testing.T) {
	start := func(protocol string) string {
		s, err := sim.New(sim.Config{Dir: t.TempDir(), Protocol: protocol, Duration: time.Hour, Concurrency: 16, Secrets: []string{"key"},
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s)
		t.Cleanup(hs.Close)
		return hs.URL
	}
	bearer := http.Header{"Authorization": {"Bearer key"}, "Content-Type": {"application/json"}}

	t.Run("openai", func(t *testing.T) {
		base := start(sim.ProtocolOpenAI) + "/v1/videos"
		for _, c := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"a model OpenAI does not list", `{"model":"sora-3","prompt":"p"}`, 404, "model_not_found"},
			{"a pro size on sora-2", `{"model":"sora-2","prompt":"p","size":"1792x1024"}`, 400, "invalid_value"},
			{"a pro size on sora-2-pro", `{"model":"sora-2-pro","prompt":"p","size":"1792x1024"}`, 200, "<nil>"},
		} {
			if status, code := call(t, "POST", base, bearer, strings.NewReader(c.body)); status != c.status || code != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, status, code, c.status, c.code)
			}
		}
		// A first frame of another size than the video's: "Inpaint image must match the requested width
		// and height".
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		_ = mw.WriteField("model", "sora-2")
		_ = mw.WriteField("prompt", "p")
		_ = mw.WriteField("size", "1280x720")
		h := make(map[string][]string)
		h["Content-Disposition"] = []string{`form-data; name="input_reference"; filename="f.png"`}
		h["Content-Type"] = []string{"image/png"}
		part, _ := mw.CreatePart(h)
		_, _ = part.Write(testkit.PNG(t, 640, 640))
		_ = mw.Close()
		if status, code := call(t, "POST", base, http.Header{"Authorization": {"Bearer key"}, "Content-Type": {mw.FormDataContentType()}}, &form); status != 400 || code != "invalid_value" {
			t.Errorf("a first frame of the wrong size: %d %s", status, code)
		}
	})

	t.Run("ark", func(t *testing.T) {
		base := start(sim.ProtocolArk) + "/api/v3/contents/generations/tasks"
		var big bytes.Buffer
		if _, err := mp4synth.Write(&big, mp4synth.Params{Width: 1920, Height: 1080, Seconds: 3}); err != nil {
			t.Fatal(err)
		}
		media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = w.Write(big.Bytes())
		}))
		t.Cleanup(media.Close)
		small := testkit.ProviderMedia(t)
		text := `{"type":"text","text":"p"}`
		for _, c := range []struct {
			name, body string
			status     int
			code       string
		}{
			{"a model Ark does not list", `{"model":"seedance-3","content":[` + text + `]}`, 404, "InvalidEndpointOrModel.NotFound"},
			{"15 s on Seedance 1.5 pro", `{"model":"seedance-1-5-pro-251215","content":[` + text + `],"duration":15}`, 400, "InvalidParameter"},
			{"12 s on Seedance 1.5 pro", `{"model":"seedance-1-5-pro-251215","content":[` + text + `],"duration":12}`, 200, "<nil>"},
			{"1080p on Seedance 2.0 fast", `{"model":"dreamina-seedance-2-0-fast-260128","content":[` + text + `],"resolution":"1080p"}`, 400, "InvalidParameter"},
			{"sound on Seedance 1.0 pro", `{"model":"seedance-1-0-pro-250528","content":[` + text + `],"generate_audio":true}`, 400, "InvalidParameter"},
			{"a 1080p reference video", `{"model":"dreamina-seedance-2-0-260128","content":[` + text + `,{"type":"video_url","video_url":{"url":"` + media.URL + `/big.mp4"},"role":"reference_video"}]}`, 400, "InvalidParameter"},
			{"a 640x640 reference video", `{"model":"dreamina-seedance-2-0-260128","content":[` + text + `,{"type":"video_url","video_url":{"url":"` + small + `/v.mp4"},"role":"reference_video"}]}`, 200, "<nil>"},
			{"a reference video on Seedance 1.0 pro", `{"model":"seedance-1-0-pro-250528","content":[` + text + `,{"type":"video_url","video_url":{"url":"` + small + `/v.mp4"},"role":"reference_video"}],"generate_audio":false}`, 400, "InvalidParameter"},
		} {
			if status, code := call(t, "POST", base, bearer, strings.NewReader(c.body)); status != c.status || code != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, status, code, c.status, c.code)
			}
		}
	})

	t.Run("gemini", func(t *testing.T) {
		base := start(sim.ProtocolGemini) + "/v1beta/models/"
		img := `{"bytesBase64Encoded":"` + base64.StdEncoding.EncodeToString(testkit.PNG(t, 64, 64)) + `","mimeType":"image/png"}`
		key := http.Header{"X-Goog-Api-Key": {"key"}, "Content-Type": {"application/json"}}
		for _, c := range []struct {
			name, model, body string
			status            int
			code              string
		}{
			{"a model the Gemini API does not list", "veo-4-generate", `{"instances":[{"prompt":"p"}]}`, 404, "NOT_FOUND"},
			{"first + last frame at 4 s", "veo-3.1-generate-preview", `{"instances":[{"prompt":"p","image":` + img + `,"lastFrame":` + img + `}],"parameters":{"durationSeconds":4}}`, 400, "INVALID_ARGUMENT"},
			{"first + last frame at 8 s", "veo-3.1-generate-preview", `{"instances":[{"prompt":"p","image":` + img + `,"lastFrame":` + img + `}],"parameters":{"durationSeconds":8}}`, 200, ""},
			{"reference images on 3.1 fast", "veo-3.1-fast-generate-preview", `{"instances":[{"prompt":"p","referenceImages":[{"image":` + img + `,"referenceType":"asset"}]}],"parameters":{"durationSeconds":8}}`, 400, "INVALID_ARGUMENT"},
			{"reference images in portrait", "veo-3.1-generate-preview", `{"instances":[{"prompt":"p","referenceImages":[{"image":` + img + `,"referenceType":"asset"}]}],"parameters":{"durationSeconds":8,"aspectRatio":"9:16"}}`, 400, "INVALID_ARGUMENT"},
			{"6 s on Veo 3", "veo-3.0-generate-001", `{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":6}}`, 400, "INVALID_ARGUMENT"},
			{"Veo 3.1 lite", "veo-3.1-lite-generate-preview", `{"instances":[{"prompt":"p"}],"parameters":{"durationSeconds":4}}`, 200, ""},
		} {
			status, code := call(t, "POST", base+c.model+":predictLongRunning", key, strings.NewReader(c.body))
			if status != c.status || (c.code != "" && code != c.code) {
				t.Errorf("%s: %d %s, want %d %s", c.name, status, code, c.status, c.code)
			}
		}
	})
}
