package httpapi_test

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
	"videogen/internal/domain/upstream/httpapi"
	"videogen/models"
)

const secret = "openai-secret-never-shown"

var cred = upstream.Credential{ID: "o-1", Kind: "openai", Secret: secret}

// provider answers every call with one status and body, as an OpenAI-style provider would, and returns
// the last request body it got.
func provider(t *testing.T, status int, body string) (*httpapi.Client, func() string) {
	t.Helper()
	var mu sync.Mutex
	var got string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = string(b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(hs.Close)
	return httpapi.New("openai", hs.URL, 5*time.Second), func() string {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

func oaiError(typ, code, msg string) string {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg, "param": nil}})
	return string(b)
}

func TestClassification(t *testing.T) {
	ctx := context.Background()
	req := upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4, Size: "1280x720"}, IdempotencyKey: "k"}
	cases := []struct {
		name   string
		status int
		body   string
		want   error
		policy bool
	}{
		{"moderation", 400, oaiError("invalid_request_error", "moderation_blocked", "Your request was blocked by our moderation system."), upstream.ErrRejected, true},
		{"content policy", 400, oaiError("invalid_request_error", "content_policy_violation", "Your request was rejected as a result of our safety system."), upstream.ErrRejected, true},
		{"bad parameters", 400, oaiError("invalid_request_error", "invalid_request", "Invalid size."), upstream.ErrRejected, false},
		{"unprocessable", 422, oaiError("invalid_request_error", "invalid_value", "seconds"), upstream.ErrRejected, false},
		{"bad key", 401, oaiError("invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+secret+"."), upstream.ErrAuth, false},
		{"no access", 403, oaiError("invalid_request_error", "unsupported_country_region_territory", "Country not supported."), upstream.ErrAuth, false},
		{"rate limit", 429, oaiError("requests", "rate_limit_exceeded", "Rate limit reached."), upstream.ErrBusy, false},
		{"timeout", 408, ``, upstream.ErrTransient, false},
		{"conflict", 409, oaiError("invalid_request_error", "conflict", "busy"), upstream.ErrTransient, false},
		{"server", 500, oaiError("server_error", "", "The server had an error."), upstream.ErrTransient, false},
		{"overloaded", 503, `not json`, upstream.ErrTransient, false},
		{"unknown", 404, oaiError("invalid_request_error", "not_found", "No such video."), upstream.ErrUnknownTask, false},
	}
	// A 404 on submit is a model the provider does not serve for this key: the route, not the request.
	c, _ := provider(t, 404, oaiError("invalid_request_error", "model_not_found", "The model sora-9 does not exist."))
	if _, err := c.Submit(ctx, cred, req); !errors.Is(err, upstream.ErrRoute) {
		t.Fatalf("submit answered 404: %v, want ErrRoute", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := provider(t, tc.status, tc.body)
			_, err := c.Submit(ctx, cred, req)
			if tc.status == 404 {
				_, err = c.Poll(ctx, cred, "video_1")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("submit: %v, want %v", err, tc.want)
			}
			var rej *upstream.RejectedError
			if errors.As(err, &rej) != (tc.want == upstream.ErrRejected) || (rej != nil && (rej.Policy != tc.policy || rej.Status != tc.status)) {
				t.Fatalf("rejection %+v, want policy %v", rej, tc.policy)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the secret is in the error: %v", err)
			}
			if _, _, err := c.Download(ctx, cred, "video_1"); !errors.Is(err, tc.want) {
				t.Fatalf("download: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestFailedStatus(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		body   string
		policy bool
	}{
		{`{"id":"video_1","status":"failed","progress":40,"error":{"code":"moderation_blocked","message":"Your request was blocked by our moderation system."}}`, true},
		{`{"id":"video_1","status":"failed","progress":40,"error":{"code":"generation_failed","message":"x"}}`, false},
	}
	for _, tc := range cases {
		c, _ := provider(t, 200, tc.body)
		st, err := c.Poll(ctx, cred, "video_1")
		if err != nil || st.State != upstream.StateFailed || st.PolicyFailure != tc.policy || st.ErrorCode == "" {
			t.Fatalf("poll %s: %+v %v", tc.body, st, err)
		}
	}
}

// TestSubmitBody: the provider's model name replaces the public alias; the seed is sent when set.
func TestSubmitBody(t *testing.T) {
	c, got := provider(t, 200, `{"id":"video_1","status":"queued","progress":0}`)
	seed := int64(7)
	_, err := c.Submit(context.Background(), cred, upstream.SubmitRequest{
		VideoRequest:  models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4, Size: "1280x720", Seed: &seed},
		UpstreamModel: "sora-2", IdempotencyKey: "k",
	})
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(got()), &body); err != nil {
		t.Fatal(err)
	}
	if body["model"] != "sora-2" || body["seed"] != 7.0 || body["seconds"] != "4" {
		t.Fatalf("body %s", got())
	}
}
