package ark_test

import (
	"context"
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
	"videogen/internal/domain/upstream/ark"
	"videogen/models"
)

// The answers below are Ark's documented ones, copied as published, so a renamed field fails here even
// where the simulator (which is exercised in internal/domain/upstream/sim) would agree with a wrong adapter.
const (
	// GET /contents/generations/tasks/{id}, succeeded: the example answer of the Volcengine Ark video
	// generation API (www.volcengine.com/docs/82379/1520757), with the signature it elides.
	docSucceeded = `{
  "id": "cgt-2025******-****",
  "model": "doubao-seedance-1-0-pro-250528",
  "status": "succeeded",
  "content": {
    "video_url": "https://ark-content-generation-cn-beijing.tos-cn-beijing.volces.com/doubao-seedance-1-0-pro/****.mp4?X-Tos-Algorithm=TOS4-HMAC-SHA256&X-Tos-Credential=AKLTY****%2Fcn-beijing%2Ftos%2Frequest&X-Tos-Date=20250331T095113Z&X-Tos-Expires=86400&X-Tos-Signature=***&X-Tos-SignedHeaders=host"
  },
  "seed": 10,
  "resolution": "720p",
  "duration": 5,
  "ratio": "16:9",
  "framespersecond": 24,
  "usage": {
    "completion_tokens": 108900,
    "total_tokens": 108900
  },
  "created_at": 1743414619,
  "updated_at": 1743414673
}`
	// The BytePlus ModelArk retrieve answer for Seedance 2.0, as its API reference shows it.
	docSucceeded2 = `{
  "id": "cgt-2026****-****",
  "model": "doubao-seedance-2-0-260128",
  "status": "succeeded",
  "content": {
    "video_url": "https://ark-content-generation-cn-beijing.tos-cn-beijing.volces.com/xxx"
  },
  "usage": {
    "completion_tokens": 108900,
    "total_tokens": 108900
  },
  "created_at": 1779348818,
  "updated_at": 1779348874,
  "seed": 78674,
  "resolution": "720p",
  "ratio": "16:9",
  "duration": 5,
  "framespersecond": 24,
  "service_tier": "default",
  "execution_expires_after": 172800,
  "generate_audio": true,
  "draft": false,
  "priority": 0
}`
	// A failed task: the error object {code, message} the reference describes, with the output
	// moderation code and message BytePlus sends.
	docFailedPolicy = `{"id":"cgt-20260901090931-abcde","model":"doubao-seedance-2-0-260128","status":"failed",` +
		`"error":{"code":"OutputVideoSensitiveContentDetected","message":"The request failed because the output video may contain sensitive information. Request id: 0217882536596960"},` +
		`"created_at":1788253659,"updated_at":1788253771}`
)

// docError is an error answer as the BytePlus common error-code table lists it (HTTP status, Type,
// Code, Message), in the {"error":{code,message,param,type}} body the ModelArk SDKs decode.
func docError(typ, code, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg + " Request ID: 0217000000000000", "param": "", "type": typ}})
	return string(b)
}

const secret = "ark-secret-never-shown"

var cred = upstream.Credential{ID: "ark-1", Kind: "ark", Secret: secret}

type answer struct {
	status int
	body   string
}

// replay is an Ark API that answers each path with the next canned answer and records what it got.
type replay struct {
	mu      sync.Mutex
	answers map[string]answer
	headers []http.Header
	bodies  []string
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.headers, p.bodies = append(p.headers, r.Header.Clone()), append(p.bodies, string(b))
	a, ok := p.answers[r.Method+" "+r.URL.Path]
	p.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func serve(t *testing.T, answers map[string]answer) (*replay, *ark.Client) {
	t.Helper()
	p := &replay{answers: answers}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, ark.New(hs.URL+"/api/v3", 5*time.Second)
}

const tasks = "/api/v3/contents/generations/tasks"

func TestDocumentedAnswers(t *testing.T) {
	ctx := context.Background()

	t.Run("create body", func(t *testing.T) {
		p, c := serve(t, map[string]answer{"POST " + tasks: {200, `{"id": "cgt-20250331175019-68d9t"}`}})
		seed := int64(42)
		st, err := c.Submit(ctx, cred, upstream.SubmitRequest{
			VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "a harbour at dawn", Seconds: 5, Size: "1280x720",
				AspectRatio: "16:9", GenerateAudio: false, Watermark: true, Seed: &seed,
				TaskInputs: models.TaskInputs{ImageURLs: []string{"https://m/r.png"}, VideoURLs: []string{"https://m/v.mp4"}, AudioURLs: []string{"https://m/a.mp3"},
					StartImageURL: "https://m/first.png", EndImageURL: "https://m/last.png"}},
			UpstreamModel: "dreamina-seedance-2-0-260128", IdempotencyKey: "never-sent",
		})
		if err != nil || st.ID != "cgt-20250331175019-68d9t" || st.State != upstream.StateQueued {
			t.Fatalf("submit: %+v %v", st, err)
		}
		p.mu.Lock()
		h, body := p.headers[0], p.bodies[0]
		p.mu.Unlock()
		if h.Get("Authorization") != "Bearer "+secret || h.Get("Idempotency-Key") != "" {
			t.Fatalf("headers %v", h)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatal(err)
		}
		img := func(u, role string) map[string]any {
			return map[string]any{"type": "image_url", "image_url": map[string]any{"url": u}, "role": role}
		}
		want := map[string]any{
			"model": "dreamina-seedance-2-0-260128",
			"content": []any{
				map[string]any{"type": "text", "text": "a harbour at dawn"},
				img("https://m/first.png", "first_frame"), img("https://m/last.png", "last_frame"), img("https://m/r.png", "reference_image"),
				map[string]any{"type": "video_url", "video_url": map[string]any{"url": "https://m/v.mp4"}, "role": "reference_video"},
				map[string]any{"type": "audio_url", "audio_url": map[string]any{"url": "https://m/a.mp3"}, "role": "reference_audio"},
			},
			"resolution": "720p", "ratio": "16:9", "duration": 5.0, "generate_audio": false, "watermark": true, "seed": 42.0,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("create body\n got %v\nwant %v", got, want)
		}
	})

	t.Run("task answers", func(t *testing.T) {
		cases := []struct {
			name, body string
			want       upstream.Status
			err        error
		}{
			{"volcengine example", docSucceeded, upstream.Status{ID: "cgt-2025******-****", State: upstream.StateCompleted, Progress: 100,
				Usage: upstream.Usage{CompletionTokens: 108900, TotalTokens: 108900}}, nil},
			{"byteplus example", docSucceeded2, upstream.Status{ID: "cgt-2026****-****", State: upstream.StateCompleted, Progress: 100,
				Usage: upstream.Usage{CompletionTokens: 108900, TotalTokens: 108900}}, nil},
			{"queued", `{"id":"cgt-1","status":"queued","created_at":1,"updated_at":1}`, upstream.Status{ID: "cgt-1", State: upstream.StateQueued}, nil},
			{"running", `{"id":"cgt-1","status":"running"}`, upstream.Status{ID: "cgt-1", State: upstream.StateInProgress}, nil},
			{"output refused", docFailedPolicy, upstream.Status{ID: "cgt-20260901090931-abcde", State: upstream.StateFailed,
				ErrorCode: "OutputVideoSensitiveContentDetected", PolicyFailure: true,
				ErrorMessage: "The request failed because the output video may contain sensitive information. Request id: 0217882536596960"}, nil},
			{"failed", `{"id":"cgt-1","status":"failed","error":{"code":"InternalServiceError","message":"boom"}}`,
				upstream.Status{ID: "cgt-1", State: upstream.StateFailed, ErrorCode: "InternalServiceError", ErrorMessage: "boom"}, nil},
			{"expired", `{"id":"cgt-1","status":"expired","error":null}`,
				upstream.Status{ID: "cgt-1", State: upstream.StateFailed, ErrorCode: "expired", ErrorMessage: "the upstream task ended expired"}, nil},
			{"cancelled", `{"id":"cgt-1","status":"cancelled"}`,
				upstream.Status{ID: "cgt-1", State: upstream.StateFailed, ErrorCode: "cancelled", ErrorMessage: "the upstream task ended cancelled"}, nil},
			{"unknown status", `{"id":"cgt-1","status":"thinking"}`, upstream.Status{}, upstream.ErrTransient},
			{"not json", `<html>`, upstream.Status{}, upstream.ErrTransient},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, c := serve(t, map[string]answer{"GET " + tasks + "/cgt-1": {200, tc.body}})
				st, err := c.Poll(ctx, cred, "cgt-1")
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || st != tc.want {
					t.Fatalf("poll: %+v %v\nwant %+v %v", st, err, tc.want, tc.err)
				}
			})
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name   string
			call   string // submit or poll
			status int
			body   string
			want   error
			policy bool
		}{
			{"input text policy", "submit", 400, docError("BadRequest", "InputTextSensitiveContentDetected", "The request failed because the input text may contain sensitive information."), upstream.ErrRejected, true},
			{"input image policy", "submit", 400, docError("BadRequest", "InputImageSensitiveContentDetected.PrivacyInformation", "The request failed because the input image may contain real person."), upstream.ErrRejected, true},
			{"severe violation", "submit", 400, docError("BadRequest", "SensitiveContentDetected.SevereViolation", "The request failed because the input text may contain severe violation information."), upstream.ErrRejected, true},
			{"risk detection", "submit", 400, docError("BadRequest", "InputTextRiskDetection", "risk"), upstream.ErrRejected, true},
			{"bad parameter", "submit", 400, docError("BadRequest", "InvalidParameter", "One or more parameters specified in the request are not valid."), upstream.ErrRejected, false},
			{"model not found on submit", "submit", 404, docError("NotFound", "InvalidEndpointOrModel.NotFound", "The model or endpoint does not exist."), upstream.ErrRoute, false},
			{"bad key", "submit", 401, docError("Unauthorized", "AuthenticationError", "The API key or AK/SK in the request is missing or invalid: "+secret+"."), upstream.ErrAuth, false},
			{"overdue account", "poll", 403, docError("Forbidden", "AccountOverdueError", "The request failed because your account has an overdue balance."), upstream.ErrAuth, false},
			{"rate limit", "submit", 429, docError("TooManyRequests", "RateLimitExceeded.EndpointRPMExceeded", "The Requests Per Minute (RPM) limit of the associated endpoint for your account has been exceeded."), upstream.ErrBusy, false},
			{"queue full", "submit", 429, docError("TooManyRequests", "QuotaExceeded", "quota"), upstream.ErrBusy, false},
			{"internal", "submit", 500, docError("InternalServiceError", "InternalServiceError", "The service encountered an unexpected internal error."), upstream.ErrTransient, false},
			{"unknown task", "poll", 404, docError("NotFound", "ResourceNotFound", "The specified task is not found."), upstream.ErrUnknownTask, false},
			{"empty 502", "poll", 502, ``, upstream.ErrTransient, false},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				_, c := serve(t, map[string]answer{"POST " + tasks: {tc.status, tc.body}, "GET " + tasks + "/cgt-1": {tc.status, tc.body}})
				var err error
				if tc.call == "submit" {
					_, err = c.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-480p", Prompt: "x", Seconds: 5, AspectRatio: "16:9"}})
				} else {
					_, err = c.Poll(ctx, cred, "cgt-1")
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("%v, want %v", err, tc.want)
				}
				var rej *upstream.RejectedError
				if errors.As(err, &rej) != (tc.want == upstream.ErrRejected) || (rej != nil && (rej.Policy != tc.policy || rej.Status != tc.status || rej.Code == "")) {
					t.Fatalf("rejection %+v, want policy %v", rej, tc.policy)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the secret is in the error: %v", err)
				}
			})
		}
	})

	t.Run("download", func(t *testing.T) {
		var mu sync.Mutex
		var auth []string
		storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auth = append(auth, r.Header.Get("Authorization"))
			mu.Unlock()
			if r.URL.Query().Get("X-Tos-Signature") == "expiredsig" {
				http.Error(w, "AccessDenied", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Length", "4")
			_, _ = io.WriteString(w, "mp4!")
		}))
		defer storage.Close()
		// The documented answer, its video URL moved onto the test's object storage.
		doc := strings.Replace(docSucceeded, "https://ark-content-generation-cn-beijing.tos-cn-beijing.volces.com", storage.URL, 1)
		_, c := serve(t, map[string]answer{
			"GET " + tasks + "/cgt-1":     {200, doc},
			"GET " + tasks + "/cgt-stale": {200, strings.Replace(doc, "X-Tos-Signature=***", "X-Tos-Signature=expiredsig", 1)},
			"GET " + tasks + "/cgt-run":   {200, `{"id":"cgt-run","status":"running"}`},
		})
		body, size, err := c.Download(ctx, cred, "cgt-1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(body)
		_ = body.Close()
		if string(b) != "mp4!" || size != 4 {
			t.Fatalf("download %q size %d", b, size)
		}
		_, _, err = c.Download(ctx, cred, "cgt-stale")
		if !errors.Is(err, upstream.ErrUnknownTask) || errors.Is(err, upstream.ErrAuth) || strings.Contains(err.Error(), "expiredsig") {
			t.Fatalf("stale URL: %v, want unknown task, not auth, and no signature shown", err)
		}
		if _, _, err := c.Download(ctx, cred, "cgt-run"); !errors.Is(err, upstream.ErrTransient) {
			t.Fatalf("download of a running task: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(auth) != 2 || auth[0] != "" || auth[1] != "" {
			t.Fatalf("object storage got Authorization %q: the credential must never leave Ark's host", auth)
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		hs := httptest.NewServer(http.NotFoundHandler())
		hs.Close()
		_, err := ark.New(hs.URL, time.Second).Poll(ctx, cred, "cgt-1")
		if !errors.Is(err, upstream.ErrTransient) || strings.Contains(err.Error(), secret) {
			t.Fatalf("unreachable: %v", err)
		}
	})
}
