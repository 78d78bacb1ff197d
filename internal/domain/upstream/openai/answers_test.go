package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/openai"
)

// OpenAI's answers as published, each replayed verbatim (status, headers, body). Sources, read 2026-11-26:
//   - the error body {"error":{"message","type","param","code"}}: openapi.yaml ErrorResponse/Error
//     (testdata/openapi-videos.yaml);
//   - 401, 403, 429 and 5xx causes: OpenAI's "Error codes" guide
//     (https://platform.openai.com/docs/guides/error-codes, as mirrored by
//     https://help.openai.com/en/articles/6891839-api-error-codes);
//   - 429 insufficient_quota verbatim as OpenAI sends it (quoted in github.com/mattvr/ShellGPT issue 23);
//     the billing codes under type insufficient_quota (credit_balance_exhausted, project_spend_limit_exceeded)
//     and 429 slow_down / 503 server_is_overloaded: Microsoft's Dev Proxy pages on OpenAI's errors
//     (https://learn.microsoft.com/en-us/microsoft-cloud/dev/dev-proxy/concepts/openai-insufficient-quota and
//     .../openai-rate-limit-reached), which cite OpenAI's guide;
//   - Retry-After and retry-after-ms: OpenAI's SDK reads both (openai-go v3.96.0,
//     internal/requestconfig/requestconfig.go parseRetryAfterHeader);
//   - the invalid-type refusal of seconds: as OpenAI answered it (quoted in github.com/THU-MAIC/OpenMAIC
//     pull request 98, 2026-03-21);
//   - moderation_blocked on a video job: openapi.yaml VideoResource.error, the code as OpenAI's developer
//     forum quotes it ("Sora 2 Pro Moderation Block").
func apiError(message, typ, param, code string) string {
	e := map[string]any{"message": message, "type": typ, "param": nil, "code": nil}
	if param != "" {
		e["param"] = param
	}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return string(b)
}

const (
	msgQuota     = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	msgBadKey    = "Incorrect API key provided: sk-proj-********************************hown. You can find your API key at https://platform.openai.com/account/api-keys."
	msgRateLimit = "Rate limit reached for sora-2 in organization org-abc123 on requests per min (RPM): Limit 2, Used 2, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more."
)

func TestDocumentedAnswers(t *testing.T) {
	ctx := context.Background()
	retryDate := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name   string
			call   string // submit, poll or download
			answer answer
			want   error
			retry  [2]time.Duration // the BusyError's RetryAfter must lie in [lo, hi]
			policy bool
		}{
			{"429 insufficient_quota", "submit", answer{429, nil, apiError(msgQuota, "insufficient_quota", "", "insufficient_quota")}, upstream.ErrOutOfCredit, [2]time.Duration{}, false},
			{"429 insufficient_quota on a poll", "poll", answer{429, nil, apiError(msgQuota, "insufficient_quota", "", "insufficient_quota")}, upstream.ErrOutOfCredit, [2]time.Duration{}, false},
			{"429 credit_balance_exhausted", "submit", answer{429, nil, apiError("You have run out of credits.", "insufficient_quota", "", "credit_balance_exhausted")}, upstream.ErrOutOfCredit, [2]time.Duration{}, false},
			{"429 project spend limit", "submit", answer{429, nil, apiError(msgQuota, "insufficient_quota", "", "project_spend_limit_exceeded")}, upstream.ErrOutOfCredit, [2]time.Duration{}, false},
			{"429 rate limit, Retry-After seconds", "submit", answer{429, map[string]string{"Retry-After": "20"}, apiError(msgRateLimit, "requests", "", "rate_limit_exceeded")}, upstream.ErrBusy, [2]time.Duration{20 * time.Second, 20 * time.Second}, false},
			{"429 rate limit, retry-after-ms", "poll", answer{429, map[string]string{"retry-after-ms": "1500", "Retry-After": "2"}, apiError(msgRateLimit, "requests", "", "rate_limit_exceeded")}, upstream.ErrBusy, [2]time.Duration{1500 * time.Millisecond, 1500 * time.Millisecond}, false},
			{"429 rate limit, Retry-After date", "submit", answer{429, map[string]string{"Retry-After": retryDate}, apiError(msgRateLimit, "requests", "", "rate_limit_exceeded")}, upstream.ErrBusy, [2]time.Duration{80 * time.Second, 90 * time.Second}, false},
			{"429 slow_down", "submit", answer{429, nil, apiError("Please reduce the rate at which you send requests.", "rate_limit_error", "", "slow_down")}, upstream.ErrBusy, [2]time.Duration{0, 0}, false},
			{"401 incorrect key", "submit", answer{401, nil, apiError(msgBadKey, "invalid_request_error", "", "invalid_api_key")}, upstream.ErrAuth, [2]time.Duration{}, false},
			{"401 on a download", "download", answer{401, nil, apiError(msgBadKey, "invalid_request_error", "", "invalid_api_key")}, upstream.ErrAuth, [2]time.Duration{}, false},
			{"403 unsupported region", "submit", answer{403, nil, apiError("Country, region, or territory not supported", "request_forbidden", "", "unsupported_country_region_territory")}, upstream.ErrAuth, [2]time.Duration{}, false},
			{"404 model on create", "submit", answer{404, nil, apiError("The model `sora-2` does not exist or you do not have access to it.", "invalid_request_error", "", "model_not_found")}, upstream.ErrRoute, [2]time.Duration{}, false},
			{"404 video on a poll", "poll", answer{404, nil, apiError("Video with id 'video_123' not found.", "invalid_request_error", "", "")}, upstream.ErrUnknownTask, [2]time.Duration{}, false},
			{"404 video on a download", "download", answer{404, nil, apiError("Video with id 'video_123' not found.", "invalid_request_error", "", "")}, upstream.ErrUnknownTask, [2]time.Duration{}, false},
			{"400 moderation_blocked", "submit", answer{400, nil, apiError("Your request was blocked by our moderation system.", "invalid_request_error", "", "moderation_blocked")}, upstream.ErrRejected, [2]time.Duration{}, true},
			{"400 content_policy_violation", "submit", answer{400, nil, apiError("Your request was rejected as a result of our safety system.", "invalid_request_error", "", "content_policy_violation")}, upstream.ErrRejected, [2]time.Duration{}, true},
			{"400 seconds of the wrong type", "submit", answer{400, nil, apiError("Invalid type for 'seconds': expected one of '4', '8', or '12', but got an integer instead.", "invalid_request_error", "seconds", "invalid_type")}, upstream.ErrRejected, [2]time.Duration{}, false},
			{"400 unknown parameter", "submit", answer{400, nil, apiError("Unknown parameter: 'aspect_ratio'.", "invalid_request_error", "aspect_ratio", "unknown_parameter")}, upstream.ErrRejected, [2]time.Duration{}, false},
			{"408", "poll", answer{408, nil, apiError("Request timed out.", "invalid_request_error", "", "")}, upstream.ErrTransient, [2]time.Duration{}, false},
			{"409", "download", answer{409, nil, apiError("Video is not ready yet.", "invalid_request_error", "", "")}, upstream.ErrTransient, [2]time.Duration{}, false},
			{"500", "submit", answer{500, nil, apiError("The server had an error while processing your request. Sorry about that!", "server_error", "", "")}, upstream.ErrTransient, [2]time.Duration{}, false},
			{"503 overloaded", "poll", answer{503, nil, apiError("The server is overloaded or not ready yet.", "service_unavailable_error", "", "server_is_overloaded")}, upstream.ErrTransient, [2]time.Duration{}, false},
			{"502 from a proxy, not JSON", "submit", answer{502, map[string]string{"Content-Type": "text/html"}, "<html><body>Bad Gateway</body></html>"}, upstream.ErrTransient, [2]time.Duration{}, false},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				p, c := serve(t, map[string]answer{
					"POST /v1/videos": tc.answer, "GET /v1/videos/video_123": tc.answer, "GET /v1/videos/video_123/content": tc.answer,
				})
				var err error
				switch tc.call {
				case "submit":
					_, err = c.Submit(ctx, cred, submitReq("x", 4, "1280x720"))
				case "poll":
					_, err = c.Poll(ctx, cred, "video_123")
				case "download":
					_, _, err = c.Download(ctx, cred, "video_123")
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("%v, want %v", err, tc.want)
				}
				if tc.want != upstream.ErrOutOfCredit && errors.Is(err, upstream.ErrOutOfCredit) || tc.want != upstream.ErrBusy && errors.Is(err, upstream.ErrBusy) {
					t.Fatalf("%v is classed as more than %v", err, tc.want)
				}
				if tc.want == upstream.ErrBusy {
					var busy *upstream.BusyError
					if !errors.As(err, &busy) || busy.RetryAfter < tc.retry[0] || busy.RetryAfter > tc.retry[1] {
						t.Fatalf("%v: RetryAfter %v, want %v..%v", err, upstream.RetryAfter(err), tc.retry[0], tc.retry[1])
					}
				}
				var rej *upstream.RejectedError
				if errors.As(err, &rej) != (tc.want == upstream.ErrRejected) || (rej != nil && (rej.Policy != tc.policy || rej.Status != tc.answer.status || rej.Code == "")) {
					t.Fatalf("rejection %+v, want policy %v", rej, tc.policy)
				}
				if strings.Contains(err.Error(), "hown") || strings.Contains(err.Error(), secret) {
					t.Fatalf("the error quotes the key: %v", err)
				}
				// The SDK's own retries are off: the worker owns them.
				if n := len(p.requests()); n != 1 {
					t.Fatalf("%d requests, want 1 (no SDK retry)", n)
				}
			})
		}
	})

	t.Run("unreachable", func(t *testing.T) {
		hs := httptest.NewServer(http.NotFoundHandler())
		hs.Close()
		_, err := openai.New(hs.URL, time.Second).Poll(ctx, cred, "video_123")
		if !errors.Is(err, upstream.ErrTransient) || strings.Contains(err.Error(), secret) {
			t.Fatalf("unreachable: %v", err)
		}
	})

	t.Run("video objects", func(t *testing.T) {
		check := mustSpec(t)
		completed := `{"id":"video_123","object":"video","model":"sora-2","status":"completed","progress":100,"created_at":1712697600,` +
			`"completed_at":1712697700,"expires_at":1712784100,"prompt":"a harbour","size":"1280x720","seconds":"12","remixed_from_video_id":null,"error":null}`
		blocked := `{"id":"video_123","object":"video","model":"sora-2","status":"failed","progress":50,"created_at":1712697600,` +
			`"completed_at":1712697650,"expires_at":null,"prompt":"a harbour","size":"720x1280","seconds":"4","remixed_from_video_id":null,` +
			`"error":{"code":"moderation_blocked","message":"Your request was blocked by our moderation system."}}`
		failed := strings.Replace(blocked, `"moderation_blocked","message":"Your request was blocked by our moderation system."`, `"video_generation_failed","message":"Video generation failed."`, 1)
		inProgress := `{"id":"video_123","object":"video","model":"sora-2-pro","status":"in_progress","progress":33,"created_at":1712697600,` +
			`"completed_at":null,"expires_at":null,"prompt":"a harbour","size":"1792x1024","seconds":"8","remixed_from_video_id":null,"error":null}`
		cases := []struct {
			name, body string
			inSpec     bool // a VideoResource as the spec has it (the reference's example omits fields)
			want       upstream.Status
			err        error
		}{
			{"the reference's example", docQueued, false, upstream.Status{ID: "video_123", State: upstream.StateQueued,
				Rendered: upstream.Rendered{Seconds: 8, Size: "1024x1792"}}, nil},
			{"in progress", inProgress, true, upstream.Status{ID: "video_123", State: upstream.StateInProgress, Progress: 33,
				Rendered: upstream.Rendered{Seconds: 8, Size: "1792x1024"}}, nil},
			{"completed", completed, true, upstream.Status{ID: "video_123", State: upstream.StateCompleted, Progress: 100,
				Rendered: upstream.Rendered{Seconds: 12, Size: "1280x720"}}, nil},
			{"blocked by moderation", blocked, true, upstream.Status{ID: "video_123", State: upstream.StateFailed, Progress: 50,
				ErrorCode: "moderation_blocked", ErrorMessage: "Your request was blocked by our moderation system.", PolicyFailure: true,
				Rendered: upstream.Rendered{Seconds: 4, Size: "720x1280"}}, nil},
			{"failed", failed, true, upstream.Status{ID: "video_123", State: upstream.StateFailed, Progress: 50,
				ErrorCode: "video_generation_failed", ErrorMessage: "Video generation failed.", Rendered: upstream.Rendered{Seconds: 4, Size: "720x1280"}}, nil},
			{"unknown status", strings.Replace(inProgress, `"in_progress"`, `"thinking"`, 1), false, upstream.Status{}, upstream.ErrTransient},
			{"not json", `<html>`, false, upstream.Status{}, upstream.ErrTransient},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if tc.inSpec {
					var v any
					if err := json.Unmarshal([]byte(tc.body), &v); err != nil {
						t.Fatal(err)
					}
					if err := check.checkSchema("VideoResource", v); err != nil {
						t.Fatalf("the test's answer is not a VideoResource: %v", err)
					}
				}
				_, c := serve(t, map[string]answer{"GET /v1/videos/video_123": {200, nil, tc.body}})
				st, err := c.Poll(ctx, cred, "video_123")
				if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || st != tc.want {
					t.Fatalf("poll: %+v %v\nwant %+v %v", st, err, tc.want, tc.err)
				}
			})
		}
	})

	t.Run("content on another host", func(t *testing.T) {
		// A compatible provider may answer the content endpoint with a redirect to its object storage.
		// The video is fetched from there without the key; a URL that has expired is a video the
		// provider no longer has for us.
		var mu sync.Mutex
		var auth []string
		storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			auth = append(auth, r.Header.Get("Authorization"))
			mu.Unlock()
			if r.URL.Query().Get("sig") == "expired" {
				http.Error(w, "AccessDenied", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "video/mp4")
			_, _ = io.WriteString(w, "mp4!")
		}))
		defer storage.Close()
		_, c := serve(t, map[string]answer{
			"GET /v1/videos/video_123/content": {302, map[string]string{"Location": storage.URL + "/v/video_123.mp4?sig=fresh"}, ""},
			"GET /v1/videos/video_old/content": {307, map[string]string{"Location": storage.URL + "/v/video_old.mp4?sig=expired"}, ""},
		})
		body, size, err := c.Download(ctx, cred, "video_123")
		if err != nil {
			t.Fatal(err)
		}
		if b := readAll(t, body); string(b) != "mp4!" || size != 4 {
			t.Fatalf("redirected download %q, size %d", b, size)
		}
		_ = body.Close()
		if _, _, err := c.Download(ctx, cred, "video_old"); !errors.Is(err, upstream.ErrUnknownTask) || strings.Contains(err.Error(), "sig=") {
			t.Fatalf("expired storage URL: %v, want ErrUnknownTask without the URL's signature", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(auth) != 2 || auth[0] != "" || auth[1] != "" {
			t.Fatalf("object storage got Authorization %q: the key must never leave the provider's API host", auth)
		}
	})

	t.Run("stills", func(t *testing.T) {
		_, c := serve(t, map[string]answer{"GET /v1/videos/video_123/content": {200, map[string]string{"Content-Type": "image/webp"}, "RIFF0000WEBP"}})
		body, ctype, size, err := c.DownloadStill(ctx, cred, "video_123", "thumbnail")
		if err != nil || ctype != "image/webp" || size != 12 {
			t.Fatalf("thumbnail: %q %d %v", ctype, size, err)
		}
		_ = body.Close()
	})
}

// TestNoCancel: OpenAI's Videos API has no way to stop a running job (openapi.yaml has DELETE
// /videos/{video_id}, which deletes a finished video and its assets), so the adapter offers none.
func TestNoCancel(t *testing.T) {
	var p upstream.Provider = openai.New("http://127.0.0.1:1", time.Second)
	if _, ok := p.(upstream.Canceller); ok {
		t.Fatal("the openai adapter claims to cancel jobs; OpenAI's API cannot")
	}
	if _, ok := p.(upstream.StillSource); !ok {
		t.Fatal("the openai adapter does not serve OpenAI's thumbnail and spritesheet variants")
	}
}
