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

func ptr[T any](v T) *T { return &v }

var cred = upstream.Credential{ID: "ark-1", Kind: "ark", Secret: secret}

type answer struct {
	status int
	body   string
	header http.Header // extra answer headers (Retry-After)
}

func okAnswer(body string) answer { return answer{status: http.StatusOK, body: body} }

// replay is an Ark API that answers each path with the next canned answer and records what it got.
type replay struct {
	mu      sync.Mutex
	answers map[string]answer
	headers []http.Header
	bodies  []string
	calls   []string // method and path of each request, in order
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.headers, p.bodies = append(p.headers, r.Header.Clone()), append(p.bodies, string(b))
	p.calls = append(p.calls, r.Method+" "+r.URL.Path)
	a, ok := p.answers[r.Method+" "+r.URL.Path]
	p.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	for k, v := range a.header {
		w.Header()[k] = v
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
		p, c := serve(t, map[string]answer{"POST " + tasks: okAnswer(`{"id": "cgt-20250331175019-68d9t"}`)})
		seed := int64(42)
		st, err := c.Submit(ctx, cred, upstream.SubmitRequest{
			VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "a harbour at dawn", Seconds: 5, Size: "1280x720",
				AspectRatio: "16:9", GenerateAudio: false, Watermark: true, Seed: &seed,
				TaskInputs: models.TaskInputs{ImageURLs: []string{"https://m/r.png"}, VideoURLs: []string{"https://m/v.mp4"}, AudioURLs: []string{"https://m/a.mp3"},
					StartImageURL: "https://m/first.png", EndImageURL: "https://m/last.png"}},
			UpstreamModel: "dreamina-seedance-2-0-260128", IdempotencyKey: "never-sent", Expires: 30 * time.Minute,
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
			// Always asked; the run timeout of 30 minutes is below Ark's minimum bound, so the bound is that.
			"return_last_frame": true, "execution_expires_after": 3600.0,
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
				Usage: upstream.Usage{CompletionTokens: 108900, TotalTokens: 108900},
				// The example's model is Seedance 1.0 pro, which renders 1248x704 for 720p 16:9 (its row).
				Rendered: upstream.Rendered{Seed: ptr(int64(10)), Resolution: "720p", Ratio: "16:9", Seconds: 5, FPS: 24, Size: "1248x704"}}, nil},
			{"byteplus example", docSucceeded2, upstream.Status{ID: "cgt-2026****-****", State: upstream.StateCompleted, Progress: 100,
				Usage:    upstream.Usage{CompletionTokens: 108900, TotalTokens: 108900},
				Rendered: upstream.Rendered{Seed: ptr(int64(78674)), Resolution: "720p", Ratio: "16:9", Seconds: 5, FPS: 24, Size: "1280x720"}}, nil},
			// Rendered is what a succeeded task reports; a running task's parameters are only what was asked.
			{"running with parameters", `{"id":"cgt-1","status":"running","seed":3,"resolution":"480p","ratio":"1:1","duration":5,"framespersecond":24}`,
				upstream.Status{ID: "cgt-1", State: upstream.StateInProgress}, nil},
			// A pair outside Seedance's size table: reported as it is, with no pixel size guessed.
			{"adaptive ratio", `{"id":"cgt-1","status":"succeeded","content":{"video_url":"https://x/v.mp4"},"resolution":"720p","ratio":"adaptive","duration":4}`,
				upstream.Status{ID: "cgt-1", State: upstream.StateCompleted, Progress: 100, Rendered: upstream.Rendered{Resolution: "720p", Ratio: "adaptive", Seconds: 4}}, nil},
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
				_, c := serve(t, map[string]answer{"GET " + tasks + "/cgt-1": okAnswer(tc.body)})
				st, err := c.Poll(ctx, cred, "cgt-1")
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || !reflect.DeepEqual(st, tc.want) {
					t.Fatalf("poll: %+v %v\nwant %+v %v", st, err, tc.want, tc.err)
				}
			})
		}
	})

	t.Run("errors", func(t *testing.T) {
		// Each answer as Ark's common error-code tables give it (HTTP status, type, code, message):
		// BytePlus ModelArk "Error codes", docs.byteplus.com/en/docs/ModelArk/1299023, and Volcengine Ark
		// 公共错误码, www.volcengine.com/docs/82379/1299023 (its API-reference PDF, pages 462-464, for the
		// OperationDenied.* and ModelNotOpen rows); stored copies read 2026-11-26.
		cases := []struct {
			name        string
			call        string // submit or poll
			status      int
			body        string
			retryAfter  string // the answer's Retry-After header
			want        error
			policy      bool
			waitAtLeast time.Duration
		}{
			{"input text policy", "submit", 400, docError("BadRequest", "InputTextSensitiveContentDetected", "The request failed because the input text may contain sensitive information."), "", upstream.ErrRejected, true, 0},
			{"input image policy", "submit", 400, docError("BadRequest", "InputImageSensitiveContentDetected.PrivacyInformation", "The request failed because the input image may contain real person."), "", upstream.ErrRejected, true, 0},
			{"severe violation", "submit", 400, docError("BadRequest", "SensitiveContentDetected.SevereViolation", "The request failed because the input text may contain severe violation information."), "", upstream.ErrRejected, true, 0},
			{"risk detection", "submit", 400, docError("BadRequest", "InputTextRiskDetection", "The request could not be processed because the input text includes sensitive content that violates ContentSecurityDetection."), "", upstream.ErrRejected, true, 0},
			{"bad parameter", "submit", 400, docError("BadRequest", "InvalidParameter", "One or more parameters specified in the request are not valid."), "", upstream.ErrRejected, false, 0},
			{"missing parameter", "submit", 400, docError("BadRequest", "MissingParameter", "The request failed because it is missing one or multiple required parameters."), "", upstream.ErrRejected, false, 0},
			// "The inference endpoint is disabled or temporarily unavailable. Please try again later."
			{"closed endpoint", "submit", 400, docError("BadRequest", "InvalidEndpoint.ClosedEndpoint", "The request targeted an endpoint that is currently closed or temporarily unavailable."), "", upstream.ErrTransient, false, 0},
			{"model not found on submit", "submit", 404, docError("NotFound", "InvalidEndpointOrModel.NotFound", "The model or endpoint dreamina-seedance-2-0-260128 does not exist or you do not have access to it."), "", upstream.ErrRoute, false, 0},
			{"endpoint not found on submit", "submit", 404, docError("NotFound", "InvalidEndpoint.NotFound", "The request targeted an endpoint that does not exist or is invalid."), "", upstream.ErrRoute, false, 0},
			{"model not activated", "submit", 404, docError("NotFound", "ModelNotOpen", "Your account 2100000000 has not activated the model dreamina-seedance-2-0-260128. Please activate the model service in the Ark Console."), "", upstream.ErrRoute, false, 0},
			// One model not activated for this account: only that route stops, not the credential.
			{"service not open", "submit", 403, docError("Forbidden", "OperationDenied.ServiceNotOpen", "Operation is denied because the model service is unavailable, please go to the Volcano Ark console activation management page to activate the corresponding model service, or submit a work order to contact us."), "", upstream.ErrRoute, false, 0},
			{"service not open on a task", "poll", 403, docError("Forbidden", "OperationDenied.ServiceNotOpen", "Operation is denied because the model service is unavailable, please go to the Volcano Ark console activation management page to activate the corresponding model service, or submit a work order to contact us."), "", upstream.ErrTransient, false, 0},
			{"bad key", "submit", 401, docError("Unauthorized", "AuthenticationError", "The API key or AK/SK in the request is missing or invalid: "+secret+"."), "", upstream.ErrAuth, false, 0},
			// A 403 that is not about the account's balance, on a submission, is about the model on this
			// account (Ark refuses a key with 401): that route closes, the credential's others go on.
			{"access denied on submit", "submit", 403, docError("Forbidden", "AccessDenied", "The request failed because you do not have access to the requested resource."), "", upstream.ErrRoute, false, 0},
			{"access denied on a task", "poll", 403, docError("Forbidden", "AccessDenied", "The request failed because you do not have access to the requested resource."), "", upstream.ErrAuth, false, 0},
			// Volcengine 错误码 (82379/1299023, as scraped in Hajimi-Commune/VolcanoArkDocs, read
			// 2026-11-29): limits that need someone to act in the console close the route, never retried.
			{"set limit reached", "submit", 429, docError("TooManyRequests", "SetLimitExceeded", `Your account [2100000000] has reached the set inference limit for the [dreamina-seedance-2-0-260128] model, and the model service has been paused. To continue using this model, please visit the Model Activation page to adjust or close the "Safe Experience Mode".`), "", upstream.ErrRoute, false, 0},
			{"free trial used up", "submit", 429, docError("TooManyRequests", "QuotaExceeded", "Your account [2100000000] has exhausted its free trial quota for the [dreamina-seedance-2-0-260128] model."), "", upstream.ErrRoute, false, 0},
			{"usage window used up", "submit", 429, docError("TooManyRequests", "QuotaExceeded", "You have exceeded the 5-hour/weekly/monthly usage quota. It will reset at 2026-11-29 18:00:00."), "", upstream.ErrRoute, false, 0},
			{"free tokens used up", "submit", 429, docError("TooManyRequests", "ModelQuotaExhausted", "Your account [2100000000] has exhausted the free tokens of the [dreamina-seedance-2-0-260128] model."), "", upstream.ErrRoute, false, 0},
			{"set limit on a task", "poll", 429, docError("TooManyRequests", "SetLimitExceeded", `Your account [2100000000] has reached the set inference limit for the [dreamina-seedance-2-0-260128] model.`), "", upstream.ErrBusy, false, 0},
			// The account is in arrears: out of credit, not a refused key.
			{"overdue account", "poll", 403, docError("Forbidden", "AccountOverdueError", "The request failed because your account has an overdue balance."), "", upstream.ErrOutOfCredit, false, 0},
			{"overdue account on submit", "submit", 403, docError("Forbidden", "AccountOverdueError", "The request failed because your account has an overdue balance."), "", upstream.ErrOutOfCredit, false, 0},
			{"overdue bill", "submit", 403, docError("Forbidden", "OperationDenied.ServiceOverdue", "Operation is denied because your account balance is overdue, please go to the Volc Trading Center to recharge in order to continue using the service."), "", upstream.ErrOutOfCredit, false, 0},
			{"rate limit", "submit", 429, docError("TooManyRequests", "RateLimitExceeded.EndpointRPMExceeded", "The Requests Per Minute (RPM) limit of the associated endpoint for your account has been exceeded."), "", upstream.ErrBusy, false, 0},
			{"rate limit with Retry-After", "submit", 429, docError("TooManyRequests", "RateLimitExceeded.EndpointTPMExceeded", "The Tokens Per Minute (TPM) limit of the associated endpoint for your account has been exceeded."), "7", upstream.ErrBusy, false, 7 * time.Second},
			{"rate limit with a Retry-After date", "poll", 429, docError("TooManyRequests", "RateLimitExceeded.EndpointRPMExceeded", "The Requests Per Minute (RPM) limit of the associated endpoint for your account has been exceeded."), time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), upstream.ErrBusy, false, 58 * time.Minute},
			// The account's queued-task limit (QuotaExceeded, "The request has exceeded the quota") and an
			// overloaded service drain by themselves: try again later.
			{"queue full", "submit", 429, docError("TooManyRequests", "QuotaExceeded", "The request has exceeded the quota."), "", upstream.ErrBusy, false, 0},
			{"overloaded", "submit", 429, docError("TooManyRequests", "ServerOverloaded", "The service is currently unable to handle additional requests due to server overload."), "", upstream.ErrBusy, false, 0},
			{"internal", "submit", 500, docError("InternalServiceError", "InternalServiceError", "The service encountered an unexpected internal error."), "", upstream.ErrTransient, false, 0},
			{"unavailable", "submit", 503, docError("ServiceUnavailable", "ServiceUnavailable", "The service is temporarily unavailable."), "", upstream.ErrTransient, false, 0},
			{"unknown task", "poll", 404, docError("NotFound", "ResourceNotFound", "The specified task is not found."), "", upstream.ErrUnknownTask, false, 0},
			{"empty 502", "poll", 502, ``, "", upstream.ErrTransient, false, 0},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var h http.Header
				if tc.retryAfter != "" {
					h = http.Header{"Retry-After": {tc.retryAfter}}
				}
				a := answer{tc.status, tc.body, h}
				_, c := serve(t, map[string]answer{"POST " + tasks: a, "GET " + tasks + "/cgt-1": a})
				var err error
				if tc.call == "submit" {
					_, err = c.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-480p", Prompt: "x", Seconds: 5, AspectRatio: "16:9"}})
				} else {
					_, err = c.Poll(ctx, cred, "cgt-1")
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("%v, want %v", err, tc.want)
				}
				// The classes the worker acts on exclude one another: a route problem or an empty
				// account is never taken for a refused key, nor the reverse.
				for _, other := range []error{upstream.ErrAuth, upstream.ErrRoute, upstream.ErrOutOfCredit, upstream.ErrBusy, upstream.ErrTransient, upstream.ErrRejected, upstream.ErrUnknownTask} {
					if other != tc.want && errors.Is(err, other) {
						t.Fatalf("%v is also %v", err, other)
					}
				}
				var rej *upstream.RejectedError
				if errors.As(err, &rej) != (tc.want == upstream.ErrRejected) || (rej != nil && (rej.Policy != tc.policy || rej.Status != tc.status || rej.Code == "")) {
					t.Fatalf("rejection %+v, want policy %v", rej, tc.policy)
				}
				var busy *upstream.BusyError
				if errors.As(err, &busy) != (tc.want == upstream.ErrBusy) {
					t.Fatalf("%v: a 429 is a *BusyError, nothing else is", err)
				}
				if wait := upstream.RetryAfter(err); wait < tc.waitAtLeast || wait > tc.waitAtLeast+2*time.Minute || (tc.waitAtLeast == 0 && wait != 0) {
					t.Fatalf("RetryAfter %v, want %v", wait, tc.waitAtLeast)
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
			"GET " + tasks + "/cgt-1":     okAnswer(doc),
			"GET " + tasks + "/cgt-stale": okAnswer(strings.Replace(doc, "X-Tos-Signature=***", "X-Tos-Signature=expiredsig", 1)),
			"GET " + tasks + "/cgt-run":   okAnswer(`{"id":"cgt-run","status":"running"}`),
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
