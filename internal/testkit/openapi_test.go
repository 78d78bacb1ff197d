package testkit

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestOpenAPICheck: the check Do runs catches each kind of drift between the code and the document,
// and lets through the refusals of invalid requests that tests send on purpose.
func TestOpenAPICheck(t *testing.T) {
	c, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	rid := "req_abcDEF123"
	model := `{"id": "videogen-2.0-720p", "object": "model", "series": "Standard", "resolution": "720p",
		"sizes": {"21:9": "1470x630", "16:9": "1280x720", "4:3": "1112x834", "1:1": "960x960", "3:4": "834x1112", "9:16": "720x1280"},
		"seconds": [4, 8, 12], "inputs": ["first_frame"], "audio": true, "rules": [], "price_per_second": "0.300000", "owned_by": "videogen"}`
	video := `{"id": "video_abc123", "object": "video", "model": "videogen-2.0-720p", "status": "queued", "progress": 0,
		"created_at": 1795251107, "completed_at": null, "expires_at": null, "prompt": "a boat", "size": "1280x720",
		"seconds": "4", "remixed_from_video_id": null, "error": null, "aspect_ratio": "16:9", "generate_audio": false,
		"watermark": false, "seed": null, "billing": {"amount": "1.200000", "currency": "usd", "state": "reserved"}}`
	badRequest := `{"error": {"code": "invalid_prompt", "message": "The prompt is empty.", "param": "prompt", "type": "invalid_request_error"}}`
	for _, tc := range []struct {
		name, method, path, body string
		reqHeaders               []string
		status                   int
		respHeaders              []string
		respBody                 string
		want                     string // part of the complaint; "" for none
	}{
		{name: "models list", method: "GET", path: "/v1/models", status: 200,
			respBody: `{"object": "list", "data": [` + model + `]}`},
		{name: "a field missing from a model", method: "GET", path: "/v1/models", status: 200,
			respBody: `{"object": "list", "data": [` + strings.Replace(model, `"owned_by": "videogen"`, `"owner": "videogen"`, 1) + `]}`,
			want:     "owned_by"},
		{name: "an added field is fine", method: "GET", path: "/v1/models", status: 200,
			respBody: `{"object": "list", "data": [` + strings.Replace(model, `"owned_by"`, `"new_field": 1, "owned_by"`, 1) + `]}`},
		{name: "no request id", method: "GET", path: "/v1/models", status: 200, respHeaders: []string{"X-Request-Id", ""},
			respBody: `{"object": "list", "data": []}`, want: "X-Request-Id"},
		{name: "undocumented status", method: "GET", path: "/v1/models", status: 418,
			respBody: `{"error": {"code": "teapot", "message": "", "param": null, "type": "invalid_request_error"}}`,
			want:     "status is not supported"},
		{name: "undocumented error code", method: "GET", path: "/v1/videos/video_x", status: 404,
			respBody: `{"error": {"code": "gone", "message": "", "param": null, "type": "not_found_error"}}`, want: "gone"},
		{name: "429 without Retry-After", method: "GET", path: "/v1/models", status: 429,
			respBody: `{"error": {"code": "rate_limited", "message": "slow down", "param": null, "type": "rate_limit_error"}}`,
			want:     "Retry-After"},
		{name: "invalid create refused", method: "POST", path: "/v1/videos", body: `{"model": "videogen-2.0-720p", "prompt": ""}`,
			status: 400, respBody: badRequest},
		{name: "invalid create accepted", method: "POST", path: "/v1/videos", body: `{"model": "videogen-2.0-720p", "prompt": ""}`,
			status: 200, respBody: video, want: "the request was accepted"},
		{name: "create without a key accepted", method: "POST", path: "/v1/videos", body: `{"model": "videogen-2.0-720p", "prompt": "a boat"}`,
			reqHeaders: []string{"Authorization", ""}, status: 200, respBody: video, want: "Bearer"},
		{name: "valid create", method: "POST", path: "/v1/videos", body: `{"model": "videogen-2.0-720p", "prompt": "a boat", "seconds": "8"}`,
			status: 200, respBody: video},
		{name: "multipart create", method: "POST", path: "/v1/videos",
			body:       "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nvideogen-2.0-720p\r\n--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\na boat\r\n--b\r\nContent-Disposition: form-data; name=\"seconds\"\r\n\r\n8\r\n--b--\r\n",
			reqHeaders: []string{"Content-Type", "multipart/form-data; boundary=b"}, status: 200, respBody: video},
		{name: "poll without its header", method: "GET", path: "/v1/videos/video_abc123", status: 200, respBody: video,
			want: "openai-poll-after-ms"},
		{name: "poll", method: "GET", path: "/v1/videos/video_abc123", status: 200, respBody: video,
			respHeaders: []string{"openai-poll-after-ms", "1000"}},
		{name: "video content", method: "GET", path: "/v1/videos/video_abc123/content", status: 200,
			respHeaders: []string{"Content-Type", "video/mp4", "Accept-Ranges", "none"}, respBody: "\x00\x00\x00\x18ftypisom"},
		{name: "video content of the wrong type", method: "GET", path: "/v1/videos/video_abc123/content", status: 200,
			respHeaders: []string{"Content-Type", "text/html", "Accept-Ranges", "none"}, respBody: "<html>", want: "text/html"},
		{name: "thumbnail", method: "GET", path: "/v1/videos/video_abc123/content?variant=thumbnail", status: 200,
			respHeaders: []string{"Content-Type", "image/webp", "Accept-Ranges", "none"}, respBody: "RIFF"},
		{name: "the video for its thumbnail", method: "GET", path: "/v1/videos/video_abc123/content?variant=thumbnail", status: 200,
			respHeaders: []string{"Content-Type", "video/mp4", "Accept-Ranges", "none"}, respBody: "mp4", want: "variant=thumbnail"},
		{name: "an image for the video", method: "GET", path: "/v1/videos/video_abc123/content", status: 200,
			respHeaders: []string{"Content-Type", "image/png", "Accept-Ranges", "none"}, respBody: "png", want: "variant=video"},
		{name: "unknown variant served", method: "GET", path: "/v1/videos/video_abc123/content?variant=poster", status: 200,
			respHeaders: []string{"Content-Type", "video/mp4", "Accept-Ranges", "none"}, respBody: "mp4", want: "variant"},
		{name: "unknown path refused", method: "GET", path: "/v1/nothing", status: 404,
			respBody: `{"error": {"code": "not_found", "message": "", "param": null, "type": "not_found_error"}}`},
		{name: "unknown path served", method: "GET", path: "/v1/nothing", status: 200, respBody: `{}`, want: "no such operation"},
		{name: "outside the API", method: "GET", path: "/healthz", status: 200, respBody: `ok`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			var req *http.Request
			if body != nil {
				req, err = http.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, body)
				req.Header.Set("Content-Type", "application/json")
			} else {
				req, err = http.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer vg_test")
			setHeaders(req.Header, tc.reqHeaders)
			r := &Resp{Status: tc.status, Header: http.Header{}, Body: []byte(tc.respBody)}
			r.Header.Set("X-Request-Id", rid)
			r.Header.Set("Content-Type", "application/json")
			if tc.status == 429 {
				r.Header.Del("Retry-After")
			}
			setHeaders(r.Header, tc.respHeaders)
			got := ""
			if checkedByOpenAPI(req.URL.Path) {
				got = c.check(req, r)
			}
			switch {
			case tc.want == "" && got != "":
				t.Errorf("complaint about a right exchange: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("complaint %q does not mention %q", got, tc.want)
			}
		})
	}
}

func setHeaders(h http.Header, pairs []string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			h.Del(pairs[i])
		} else {
			h.Set(pairs[i], pairs[i+1])
		}
	}
}

// complaints records what a check reports instead of failing the test.
type complaints struct {
	testing.TB
	got []string
}

func (c *complaints) Helper() {}
func (c *complaints) Errorf(format string, args ...any) {
	c.got = append(c.got, fmt.Sprintf(format, args...))
}

// TestOpenAPITransport: calls made through another client are checked like Do's, and the client still
// reads the whole answer.
func TestOpenAPITransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_abc")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("broken") != "" {
			_, _ = io.WriteString(w, `{"object": "list"}`)
			return
		}
		_, _ = io.WriteString(w, `{"object": "list", "data": []}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		query string
		want  bool
	}{{"", false}, {"?broken=1", true}} {
		rec := &complaints{TB: t}
		client := &http.Client{Transport: OpenAPITransport(rec, nil)}
		req, err := http.NewRequest("GET", srv.URL+"/v1/models"+tc.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer vg_test")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if !strings.HasPrefix(string(b), `{"object": "list"`) {
			t.Errorf("the client read %q", b)
		}
		if got := len(rec.got) > 0; got != tc.want || (got && !strings.Contains(rec.got[0], "data")) {
			t.Errorf("%s: complaints %q", tc.query, rec.got)
		}
	}
}
