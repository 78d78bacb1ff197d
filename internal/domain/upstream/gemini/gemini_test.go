package gemini_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/gemini"
	"videogen/models"
)

const secret = "gemini-secret-never-shown"

var cred = upstream.Credential{ID: "gemini-1", Kind: "gemini", Secret: secret}

// The answers below are the Gemini API's, in the shapes its documentation gives them, so that a renamed
// field fails here even where the simulator (exercised in internal/domain/upstream/sim) would agree
// with a wrong adapter.
const (
	// GET /v1beta/{operation name} of a finished Veo operation: the Gemini API's Veo page
	// (ai.google.dev/gemini-api/docs/video, the REST example reads
	// .response.generateVideoResponse.generatedSamples[0].video.uri; read 2026-11-26), and the SDK's
	// generateVideosOperationFromMldev / generateVideosResponseFromMldev (models.go, genai v1.77.0).
	docDone = `{
  "name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma",
  "done": true,
  "response": {
    "@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
    "generateVideoResponse": {
      "generatedSamples": [
        {"video": {"uri": "FILEHOST/v1beta/files/3ka9pz0wq1xy:download?alt=media"}}
      ]
    }
  }
}`
	docRunning = `{"name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma"}`
	// A done operation whose video Google's Responsible AI checks withheld: raiMediaFilteredCount and
	// raiMediaFilteredReasons (the SDK's GenerateVideosResponse, types.go).
	docFiltered = `{"name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma", "done": true,
  "response": {"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
    "generateVideoResponse": {"raiMediaFilteredCount": 1,
      "raiMediaFilteredReasons": ["Your prompt may violate our policies. Try rephrasing it."]}}}`
	// A done operation with an error: google.rpc.Status, code 13 (INTERNAL).
	docFailed = `{"name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma", "done": true,
  "error": {"code": 13, "message": "Video generation failed due to an internal error."}}`
)

// docError is an error answer as the Gemini API's troubleshooting page lists it (HTTP code, status,
// description; ai.google.dev/gemini-api/docs/troubleshooting, "Backend error codes", read 2026-11-26),
// in the google.rpc.Status JSON body the SDK decodes (APIError, api_client.go).
func docError(code int, status, msg string, details ...map[string]any) string {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

type answer struct {
	status  int
	body    string
	headers map[string]string
}

// replay is a Gemini API that answers each method and path with a canned answer and records what it got.
type replay struct {
	mu       sync.Mutex
	answers  map[string]answer
	requests []*http.Request
	bodies   []string
	srv      *httptest.Server
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.requests, p.bodies = append(p.requests, r.Clone(context.Background())), append(p.bodies, string(b))
	a, ok := p.answers[r.Method+" "+r.URL.Path]
	p.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	if strings.HasPrefix(a.body, "{") {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, strings.ReplaceAll(a.body, "FILEHOST", p.srv.URL))
}

func (p *replay) last(t *testing.T) (*http.Request, string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.requests) == 0 {
		t.Fatal("no request reached the Gemini API")
	}
	return p.requests[len(p.requests)-1], p.bodies[len(p.bodies)-1]
}

func serve(t *testing.T, answers map[string]answer) (*replay, *gemini.Client) {
	t.Helper()
	p := &replay{answers: answers}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p, gemini.New(p.srv.URL, 5*time.Second)
}

const (
	createPath = "POST /v1beta/models/veo-3.1-generate-preview:predictLongRunning"
	opPath     = "GET /v1beta/models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma"
	opName     = "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma"
)

func submitReq() upstream.SubmitRequest {
	return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "a lighthouse at dusk",
		Seconds: 8, Size: "1280x720", AspectRatio: "16:9"}, UpstreamModel: "veo-3.1-generate-preview", UpstreamSize: "1280x720"}
}

// TestDocumentedAnswers replays each documented error answer of the Gemini API at submit and at poll,
// and checks the class the worker acts on, and that no error carries the key.
func TestDocumentedAnswers(t *testing.T) {
	retryInfo := map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "33s"}
	keyInvalid := map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com",
		"metadata": map[string]string{"service": "generativelanguage.googleapis.com"}}
	cases := []struct {
		name     string
		onTask   bool // answer a poll rather than the create
		answer   answer
		want     error         // errors.Is target
		retry    time.Duration // for busy answers: the wait asked
		rejected string        // for RejectedError: its code
		policy   bool          // for RejectedError: a content-policy refusal
	}{
		{name: "400 INVALID_ARGUMENT: the request body is malformed", answer: answer{status: 400, body: docError(400, "INVALID_ARGUMENT", "Request contains an invalid argument.")},
			want: upstream.ErrRejected, rejected: "INVALID_ARGUMENT"},
		{name: "400 INVALID_ARGUMENT API_KEY_INVALID: the key is refused", answer: answer{status: 400, body: docError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key. "+secret[:12], keyInvalid)},
			want: upstream.ErrAuth},
		{name: "400 FAILED_PRECONDITION: billing not enabled", answer: answer{status: 400, body: docError(400, "FAILED_PRECONDITION", "Gemini API free tier is not available in your country. Please enable billing on your project in Google AI Studio.")},
			want: upstream.ErrOutOfCredit},
		{name: "403 PERMISSION_DENIED", answer: answer{status: 403, body: docError(403, "PERMISSION_DENIED", "Your API key doesn't have the required permissions. "+secret[:12])},
			want: upstream.ErrAuth},
		{name: "404 NOT_FOUND on create: the model is not served", answer: answer{status: 404, body: docError(404, "NOT_FOUND", "models/veo-3.1-generate-preview is not found for API version v1beta, or is not supported for predictLongRunning.")},
			want: upstream.ErrRoute},
		{name: "404 NOT_FOUND on poll: the operation is unknown", onTask: true, answer: answer{status: 404, body: docError(404, "NOT_FOUND", "The requested resource wasn't found.")},
			want: upstream.ErrUnknownTask},
		{name: "429 RESOURCE_EXHAUSTED with RetryInfo", answer: answer{status: 429, body: docError(429, "RESOURCE_EXHAUSTED", "You've exceeded the rate limit.", retryInfo)},
			want: upstream.ErrBusy, retry: 33 * time.Second},
		{name: "429 RESOURCE_EXHAUSTED with Retry-After only", onTask: true, answer: answer{status: 429, body: docError(429, "RESOURCE_EXHAUSTED", "You've exceeded the rate limit."), headers: map[string]string{"Retry-After": "7"}},
			want: upstream.ErrBusy, retry: 7 * time.Second},
		// Prepaid billing (since 2026-03-23): the account's credit is used up, as reported on the Gemini
		// developer forum (discuss.ai.google.dev/t/…/169215, read 2026-11-29). Not a busy key.
		{name: "429 RESOURCE_EXHAUSTED: prepayment credits depleted", answer: answer{status: 429, body: docError(429, "RESOURCE_EXHAUSTED", "Your prepayment credits are depleted. Please go to AI Studio at https://ai.studio/projects to manage your project and billing. Learn more at https://ai.google.dev/gemini-api/docs/billing#prepay. ")},
			want: upstream.ErrOutOfCredit},
		// A moderation block answered as a refusal of the request (Vertex AI's Responsible AI wording with
		// its support codes): the content policy, so the task fails content_policy_violation.
		{name: "400 INVALID_ARGUMENT naming the usage guidelines", answer: answer{status: 400, body: docError(400, "INVALID_ARGUMENT", "Veo could not generate videos because the input image violates Vertex AI's usage guidelines. If you think this was an error, send feedback. Support codes: 15236754")},
			want: upstream.ErrRejected, rejected: "INVALID_ARGUMENT", policy: true},
		{name: "500 INTERNAL", answer: answer{status: 500, body: docError(500, "INTERNAL", "An unexpected error occurred on Google's side.")}, want: upstream.ErrTransient},
		{name: "503 UNAVAILABLE", onTask: true, answer: answer{status: 503, body: docError(503, "UNAVAILABLE", "The service may be temporarily overloaded or down.")}, want: upstream.ErrTransient},
		{name: "504 DEADLINE_EXCEEDED", answer: answer{status: 504, body: docError(504, "DEADLINE_EXCEEDED", "The service is unable to finish processing within the deadline.")}, want: upstream.ErrTransient},
		{name: "502 from a front end, not JSON", answer: answer{status: 502, body: "<html>Bad Gateway</html>"}, want: upstream.ErrTransient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := createPath
			if tc.onTask {
				path = opPath
			}
			_, c := serve(t, map[string]answer{path: tc.answer})
			var err error
			if tc.onTask {
				_, err = c.Poll(context.Background(), cred, opName)
			} else {
				_, err = c.Submit(context.Background(), cred, submitReq())
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), secret[:12]) {
				t.Errorf("the error quotes the key: %v", err)
			}
			if tc.retry != 0 {
				if got := upstream.RetryAfter(err); got != tc.retry {
					t.Errorf("retry after %s, want %s", got, tc.retry)
				}
				if errors.Is(err, upstream.ErrOutOfCredit) {
					t.Errorf("a rate limit read as out of credit: %v", err)
				}
			}
			if tc.rejected != "" {
				var re *upstream.RejectedError
				if !errors.As(err, &re) || re.Code != tc.rejected || re.Policy != tc.policy {
					t.Errorf("rejection %+v, want code %s, policy %v", re, tc.rejected, tc.policy)
				}
			}
		})
	}
}

// TestOperationStates maps each documented operation answer onto ours.
func TestOperationStates(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		want   upstream.Status
		policy bool
	}{
		{"not done", docRunning, upstream.Status{ID: opName, State: upstream.StateInProgress}, false},
		{"done with a video", docDone, upstream.Status{ID: opName, State: upstream.StateCompleted, Progress: 100}, false},
		{"done, filtered by the safety checks", docFiltered, upstream.Status{ID: opName, State: upstream.StateFailed, ErrorCode: "rai_media_filtered",
			ErrorMessage: "Your prompt may violate our policies. Try rephrasing it.", PolicyFailure: true}, true},
		{"done with an error", docFailed, upstream.Status{ID: opName, State: upstream.StateFailed, ErrorCode: "INTERNAL",
			ErrorMessage: "Video generation failed due to an internal error."}, false},
		// A moderation block reported as the operation's INVALID_ARGUMENT (Vertex AI's Responsible AI
		// wording): the content policy.
		{"done with a safety refusal", `{"name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma", "done": true,
  "error": {"code": 3, "message": "Veo could not generate videos because the input image violates the usage guidelines. Support codes: 15236754"}}`,
			upstream.Status{ID: opName, State: upstream.StateFailed, ErrorCode: "INVALID_ARGUMENT",
				ErrorMessage: "Veo could not generate videos because the input image violates the usage guidelines. Support codes: 15236754", PolicyFailure: true}, true},
		// The audio filter (the Veo page: "Veo 3.1 will sometimes block a video … because of … the audio.
		// You will not be charged"): worth one more submission.
		{"done, filtered for its audio", `{"name": "models/veo-3.1-generate-preview/operations/5xkq2w9zb1ma", "done": true,
  "response": {"generateVideoResponse": {"raiMediaFilteredCount": 1, "raiMediaFilteredReasons": ["We encountered an issue with the audio for your prompt, which means we could not create your video."]}}}`,
			upstream.Status{ID: opName, State: upstream.StateFailed, ErrorCode: "rai_media_filtered",
				ErrorMessage: "We encountered an issue with the audio for your prompt, which means we could not create your video.", PolicyFailure: true, RetryOnce: true}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, c := serve(t, map[string]answer{opPath: {status: 200, body: tc.body}})
			st, err := c.Poll(context.Background(), cred, opName)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st, tc.want) {
				t.Errorf("status %+v\nwant   %+v", st, tc.want)
			}
		})
	}
}

// png is a 1×1 PNG, served as an input image.
var png, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYPj/HwADAgH/eL9GtQAAAABJRU5ErkJggg==")

// TestSubmitSendsWhatVeoTakes captures the body of a table of creates: the SDK's predictLongRunning
// shape (instances[0].prompt, image, lastFrame, referenceImages; parameters.aspectRatio, resolution,
// durationSeconds — models.go, generateVideosParametersToMldev and generateVideosConfigToMldev), the key
// in x-goog-api-key and nowhere else, no seed (the SDK refuses it on the Gemini API), and the images as
// inline bytes fetched from our URLs without the key.
func TestSubmitSendsWhatVeoTakes(t *testing.T) {
	var mediaMu sync.Mutex
	var mediaKeys []string
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mediaMu.Lock()
		mediaKeys = append(mediaKeys, r.Header.Get("x-goog-api-key")+r.Header.Get("Authorization"))
		mediaMu.Unlock()
		if r.URL.Path == "/gone.png" {
			http.Error(w, "expired", http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}))
	t.Cleanup(media.Close)
	img := map[string]any{"bytesBase64Encoded": base64.StdEncoding.EncodeToString(png), "mimeType": "image/png"}
	seed := int64(42)
	cases := []struct {
		name string
		edit func(*upstream.SubmitRequest)
		want map[string]any
	}{
		{"text, 16:9 720p, 8 s, a seed asked", func(r *upstream.SubmitRequest) { r.Seed = &seed; r.GenerateAudio = true }, map[string]any{
			"instances":  []any{map[string]any{"prompt": "a lighthouse at dusk"}},
			"parameters": map[string]any{"aspectRatio": "16:9", "resolution": "720p", "durationSeconds": float64(8)}}},
		{"portrait 1080p", func(r *upstream.SubmitRequest) {
			r.UpstreamSize, r.Size, r.Model = "1080x1920", "1080x1920", "videogen-2.0-1080p"
		}, map[string]any{
			"instances":  []any{map[string]any{"prompt": "a lighthouse at dusk"}},
			"parameters": map[string]any{"aspectRatio": "9:16", "resolution": "1080p", "durationSeconds": float64(8)}}},
		{"first and last frame, 4 s", func(r *upstream.SubmitRequest) {
			r.Seconds, r.StartImageURL, r.EndImageURL = 4, media.URL+"/first.png?sig=abc", media.URL+"/last.png?sig=def"
		}, map[string]any{
			"instances":  []any{map[string]any{"prompt": "a lighthouse at dusk", "image": img, "lastFrame": img}},
			"parameters": map[string]any{"aspectRatio": "16:9", "resolution": "720p", "durationSeconds": float64(4)}}},
		{"reference images as assets", func(r *upstream.SubmitRequest) { r.ImageURLs = []string{media.URL + "/a.png", media.URL + "/b.png"} }, map[string]any{
			"instances": []any{map[string]any{"prompt": "a lighthouse at dusk", "referenceImages": []any{
				map[string]any{"image": img, "referenceType": "ASSET"}, map[string]any{"image": img, "referenceType": "ASSET"}}}},
			"parameters": map[string]any{"aspectRatio": "16:9", "resolution": "720p", "durationSeconds": float64(8)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := createPath
			p, c := serve(t, map[string]answer{path: {status: 200, body: docRunning}})
			req := submitReq()
			tc.edit(&req)
			st, err := c.Submit(context.Background(), cred, req)
			if err != nil {
				t.Fatal(err)
			}
			if st.ID != opName || st.State != upstream.StateInProgress {
				t.Errorf("status %+v, want the operation in progress", st)
			}
			r, body := p.last(t)
			if got := r.Method + " " + r.URL.Path; got != path {
				t.Errorf("sent %s, want %s", got, path)
			}
			if r.Header.Get("x-goog-api-key") != secret || r.Header.Get("Authorization") != "" || strings.Contains(r.URL.RawQuery, secret) {
				t.Errorf("key sent as header %q, Authorization %q, query %q", r.Header.Get("x-goog-api-key"), r.Header.Get("Authorization"), r.URL.RawQuery)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("body\n%s\nwant\n%v", body, tc.want)
			}
		})
	}
	mediaMu.Lock()
	for _, k := range mediaKeys {
		if k != "" {
			t.Errorf("a media URL received a credential: %q", k)
		}
	}
	mediaMu.Unlock()

	t.Run("nothing is sent for a size Veo does not render, or an input that is gone", func(t *testing.T) {
		p, c := serve(t, map[string]answer{createPath: {status: 200, body: docRunning}})
		req := submitReq()
		req.UpstreamSize = "960x960"
		if _, err := c.Submit(context.Background(), cred, req); !errors.Is(err, upstream.ErrRejected) {
			t.Errorf("960x960: %v, want a rejection", err)
		}
		req = submitReq()
		req.StartImageURL = media.URL + "/gone.png"
		var re *upstream.RejectedError
		if _, err := c.Submit(context.Background(), cred, req); !errors.As(err, &re) || re.Code != "input_unavailable" {
			t.Errorf("expired first frame: %v, want input_unavailable", err)
		}
		if len(p.requests) != 0 {
			t.Errorf("%d requests reached the Gemini API", len(p.requests))
		}
	})
}

// TestKeyChangeMakesANewClient: the SDK client is kept per credential and key, so a reload with a new
// key sends the new one.
func TestKeyChangeMakesANewClient(t *testing.T) {
	p, c := serve(t, map[string]answer{opPath: {status: 200, body: docRunning}})
	for _, key := range []string{"first-key", "first-key", "second-key"} {
		if _, err := c.Poll(context.Background(), upstream.Credential{ID: "g", Secret: key}, opName); err != nil {
			t.Fatal(err)
		}
		if r, _ := p.last(t); r.Header.Get("x-goog-api-key") != key {
			t.Errorf("sent key %q, want %q", r.Header.Get("x-goog-api-key"), key)
		}
	}
}

// TestDownloadStreamsWithTheKey: the video is read from the operation's file URI with the key in
// x-goog-api-key (the Gemini API's Veo page downloads it with `curl -L -H "x-goog-api-key: …"`), and a
// redirect to another host does not carry the key there.
func TestDownloadStreamsWithTheKey(t *testing.T) {
	video := strings.Repeat("v", 1<<16)
	var otherMu sync.Mutex
	var otherKey []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherMu.Lock()
		otherKey = append(otherKey, r.Header.Get("x-goog-api-key"))
		otherMu.Unlock()
		_, _ = io.WriteString(w, video)
	}))
	t.Cleanup(other.Close)

	p, c := serve(t, map[string]answer{
		opPath: {status: 200, body: docDone},
		"GET /v1beta/files/3ka9pz0wq1xy:download": {status: 302, headers: map[string]string{"Location": other.URL + "/signed/video.mp4?sig=x"}},
	})
	body, _, err := c.Download(context.Background(), cred, opName)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(body)
	_ = body.Close()
	if err != nil || string(b) != video {
		t.Fatalf("downloaded %d bytes (%v), want the video", len(b), err)
	}
	p.mu.Lock()
	var fileReq *http.Request
	for _, r := range p.requests {
		if strings.HasPrefix(r.URL.Path, "/v1beta/files/") {
			fileReq = r
		}
	}
	p.mu.Unlock()
	if fileReq == nil || fileReq.Header.Get("x-goog-api-key") != secret || fileReq.URL.Query().Get("alt") != "media" {
		t.Fatalf("the file request %+v did not carry the key and alt=media", fileReq)
	}
	otherMu.Lock()
	defer otherMu.Unlock()
	if len(otherKey) != 1 || otherKey[0] != "" {
		t.Errorf("the redirect target got keys %q, want one request without a key", otherKey)
	}
}

// TestDownloadOfAGoneFile: a file the Gemini API no longer keeps is an unknown task, not a refused key.
func TestDownloadOfAGoneFile(t *testing.T) {
	_, c := serve(t, map[string]answer{
		opPath: {status: 200, body: docDone},
		"GET /v1beta/files/3ka9pz0wq1xy:download": {status: 404, body: docError(404, "NOT_FOUND", "File not found.")},
	})
	if _, _, err := c.Download(context.Background(), cred, opName); !errors.Is(err, upstream.ErrUnknownTask) {
		t.Fatalf("error %v, want ErrUnknownTask", err)
	}
}

// TestCancelIsNotOffered: the Gemini API documents no cancel for video operations.
func TestCancelIsNotOffered(t *testing.T) {
	p, c := serve(t, nil)
	var canceller upstream.Canceller = c
	if err := canceller.Cancel(context.Background(), cred, opName); !errors.Is(err, upstream.ErrNotCancellable) {
		t.Fatalf("cancel: %v, want ErrNotCancellable", err)
	}
	if len(p.requests) != 0 {
		t.Errorf("cancel sent %d requests", len(p.requests))
	}
}

// TestVeoRules: a Veo 3.1 route refuses at create what Veo cannot take (the SDK's GenerateVideosConfig,
// types.go; the Veo page's parameters): a last frame alone, frames with references, a fourth reference.
func TestVeoRules(t *testing.T) {
	caps, ok := upstream.RouteCaps(gemini.Models["veo-3.1-generate-preview"], "videogen-2.0-720p")
	if !ok {
		t.Fatal("veo-3.1 sells no size of videogen-2.0-720p")
	}
	img := "https://media.example/a.png"
	cases := []struct {
		name  string
		in    models.TaskInputs
		param string // "" = accepted
	}{
		{"text only", models.TaskInputs{}, ""},
		{"first frame", models.TaskInputs{StartImageURL: img}, ""},
		{"first and last frame", models.TaskInputs{StartImageURL: img, EndImageURL: img}, ""},
		{"three references", models.TaskInputs{ImageURLs: []string{img, img, img}}, ""},
		{"last frame alone", models.TaskInputs{EndImageURL: img}, "end_image_url"},
		{"first frame with references", models.TaskInputs{StartImageURL: img, ImageURLs: []string{img}}, "start_image_url"},
		{"last frame with references", models.TaskInputs{EndImageURL: img, ImageURLs: []string{img}}, "end_image_url"},
		{"four references", models.TaskInputs{ImageURLs: []string{img, img, img, img}}, "image_urls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := upstream.Refusal([]upstream.Capabilities{caps}, models.VideoRequest{Model: "videogen-2.0-720p", Seconds: 8, Size: "1280x720", TaskInputs: tc.in})
			var ue *upstream.UnsupportedError
			switch {
			case tc.param == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.param != "" && (!errors.As(err, &ue) || ue.Param != tc.param):
				t.Errorf("error %v, want a refusal naming %s", err, tc.param)
			}
		})
	}
}

// TestDownloadThroughAProxyBase: a credential whose base URL is a proxy gets the operation's file URI
// on Google's host, yet fetches the file through its own base — the path the SDK's Files.Download
// builds, {base}/v1beta/files/{id}:download?alt=media — with the key; a refusal there is the key's
// (ErrAuth), not a stale URL.
func TestDownloadThroughAProxyBase(t *testing.T) {
	googleHosted := strings.ReplaceAll(docDone, "FILEHOST", "https://generativelanguage.googleapis.com")
	p, c := serve(t, map[string]answer{
		opPath: {status: 200, body: googleHosted},
		"GET /v1beta/files/3ka9pz0wq1xy:download": {status: 200, body: "the video"},
	})
	body, _, err := c.Download(context.Background(), cred, opName)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(body)
	_ = body.Close()
	if string(b) != "the video" {
		t.Fatalf("downloaded %q", b)
	}
	if r, _ := p.last(t); r.URL.Path != "/v1beta/files/3ka9pz0wq1xy:download" || r.URL.Query().Get("alt") != "media" || r.Header.Get("x-goog-api-key") != secret {
		t.Fatalf("the file was asked as %s?%s (key %v), want through the base with the key", r.URL.Path, r.URL.RawQuery, r.Header.Get("x-goog-api-key") != "")
	}

	_, refusing := serve(t, map[string]answer{
		opPath: {status: 200, body: googleHosted},
		"GET /v1beta/files/3ka9pz0wq1xy:download": {status: 401, body: docError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")},
	})
	if _, _, err := refusing.Download(context.Background(), cred, opName); !errors.Is(err, upstream.ErrAuth) {
		t.Fatalf("a 401 through the base: %v, want ErrAuth", err)
	}
}
