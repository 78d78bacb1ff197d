package mail

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resend/resend-go/v2"
)

const testKey = "re_test_5ecret_k3y"

// sentEmail is the body Resend's POST /emails accepts.
type sentEmail struct {
	From    string       `json:"from"`
	To      []string     `json:"to"`
	Subject string       `json:"subject"`
	Text    string       `json:"text"`
	HTML    string       `json:"html"`
	Tags    []resend.Tag `json:"tags"`
}

// seenRequest is what the fake saw, checked by the test goroutine rather than inside the handler.
type seenRequest struct {
	method, path, auth, contentType, idempotencyKey string
	body                                            sentEmail
}

// fakeResend answers like Resend's API: it rejects what Resend would reject, then calls respond.
type fakeResend struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (f *fakeResend) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func writeResendError(w http.ResponseWriter, status int, name, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"statusCode": status, "name": name, "message": message})
}

func startFake(t *testing.T, respond http.HandlerFunc) (*fakeResend, *httptest.Server) {
	t.Helper()
	f := &fakeResend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seenRequest{
			method:         r.Method,
			path:           r.URL.Path,
			auth:           r.Header.Get("Authorization"),
			contentType:    r.Header.Get("Content-Type"),
			idempotencyKey: r.Header.Get("Idempotency-Key"),
		}
		// Read the body to EOF: only then does the server notice a client that hangs up.
		raw, bodyErr := io.ReadAll(r.Body)
		if bodyErr == nil {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			bodyErr = dec.Decode(&s.body)
		}
		f.mu.Lock()
		f.seen = append(f.seen, s)
		f.mu.Unlock()
		switch {
		case r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/emails"):
			writeResendError(w, http.StatusNotFound, "not_found", "The requested endpoint does not exist.")
		case s.auth != "Bearer "+testKey:
			writeResendError(w, http.StatusUnauthorized, "missing_api_key", "Missing API key in the authorization header.")
		case s.contentType != "application/json" || bodyErr != nil:
			writeResendError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("bad body: %v", bodyErr))
		default:
			respond(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return f, srv
}

func answerOK(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"49a3999c-0ce1-4ea6-ab68-afcd6dc2e794"}`))
}

func newTestResend(t *testing.T, baseURL string) *Resend {
	t.Helper()
	s, err := NewResend(testKey, "videogen <no-reply@example.com>", baseURL)
	if err != nil {
		t.Fatalf("NewResend: %v", err)
	}
	return s
}

var verifyMessage = Message{
	To:             "ada@example.com",
	Subject:        "Verify your e-mail",
	Text:           "Open https://videogen.test/verify?token=abc to verify.",
	HTML:           `<p><a href="https://videogen.test/verify?token=abc">Verify</a></p>`,
	IdempotencyKey: "verify/tok_123",
	Tags:           map[string]string{"kind": "verify", "env": "test"},
}

func TestResendSendsWhatResendExpects(t *testing.T) {
	f, srv := startFake(t, answerOK)
	if err := newTestResend(t, srv.URL).Send(context.Background(), verifyMessage); err != nil {
		t.Fatalf("Send: %v", err)
	}
	seen := f.requests()
	if len(seen) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(seen))
	}
	got := seen[0]
	want := seenRequest{
		method:         http.MethodPost,
		path:           "/emails",
		auth:           "Bearer " + testKey,
		contentType:    "application/json",
		idempotencyKey: "verify/tok_123",
		body: sentEmail{
			From:    "videogen <no-reply@example.com>",
			To:      []string{"ada@example.com"},
			Subject: verifyMessage.Subject,
			Text:    verifyMessage.Text,
			HTML:    verifyMessage.HTML,
			// Sorted by name, so a retry sends the same body under the same idempotency key.
			Tags: []resend.Tag{{Name: "env", Value: "test"}, {Name: "kind", Value: "verify"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("request:\n got %+v\nwant %+v", got, want)
	}
}

func TestResendKeepsBaseURLPath(t *testing.T) {
	f, srv := startFake(t, answerOK)
	if err := newTestResend(t, srv.URL+"/resend").Send(context.Background(), verifyMessage); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if seen := f.requests(); len(seen) != 1 || seen[0].path != "/resend/emails" {
		t.Fatalf("requests = %+v, want one to /resend/emails", seen)
	}
}

func TestResendErrorSaysWhatFailedWithoutTheKey(t *testing.T) {
	tests := []struct {
		name    string
		respond http.HandlerFunc
		want    []string
		is      error
	}{
		{
			name: "validation error",
			respond: func(w http.ResponseWriter, _ *http.Request) {
				writeResendError(w, http.StatusUnprocessableEntity, "validation_error", "Invalid `to` field.")
			},
			want: []string{"ada@example.com", "Verify your e-mail", "Invalid `to` field."},
		},
		{
			name: "server echoing the authorization header",
			respond: func(w http.ResponseWriter, r *http.Request) {
				writeResendError(w, http.StatusForbidden, "invalid_api_key", "API key is invalid: "+r.Header.Get("Authorization"))
			},
			want: []string{"ada@example.com", "API key is invalid: Bearer [redacted]"},
		},
		{
			name: "rate limit",
			respond: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("retry-after", "1")
				writeResendError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Too many requests.")
			},
			want: []string{"ada@example.com", "Too many requests."},
			is:   resend.ErrRateLimit,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, srv := startFake(t, tt.respond)
			err := newTestResend(t, srv.URL).Send(context.Background(), verifyMessage)
			if err == nil {
				t.Fatal("Send succeeded, want an error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
		})
	}
}

func TestResendRespectsContextDeadline(t *testing.T) {
	release := make(chan struct{})
	_, srv := startFake(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	// Registered after startFake, so it runs before srv.Close and never leaves the handler hanging.
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := newTestResend(t, srv.URL).Send(ctx, verifyMessage)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Send took %v after a 100ms deadline", d)
	}
}

func TestNewResendRejectsBadConfig(t *testing.T) {
	tests := []struct{ name, key, from, base string }{
		{"empty key", " ", "a@example.com", ""},
		{"empty from", testKey, "", ""},
		{"base without host", testKey, "a@example.com", "/emails"},
		{"unparsable base", testKey, "a@example.com", "http://[::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewResend(tt.key, tt.from, tt.base)
			if err == nil {
				t.Fatal("NewResend succeeded, want an error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
		})
	}
}
