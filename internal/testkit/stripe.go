package testkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"
)

// Stripe settings the payment tests run the server with: stripe-mock accepts any sk_test_ key, and the
// tests sign their webhooks with the same secret as the server verifies them with.
const (
	StripeKey           = "sk_test_videogen"
	StripeWebhookSecret = "whsec_videogen_test"
	StripeAPIVersion    = "2023-10-16" // the version stripe-go v76 pins, and our endpoint must be pinned to
)

var (
	stripeMockOnce sync.Once
	stripeMockURL  string
	stripeMockErr  error
)

// StripeMockURL returns the address of Stripe's own API mock (stripe-mock), started once per test binary
// on a free loopback port and stopped with it. make test-deps builds it; STRIPE_MOCK names the binary.
func StripeMockURL(t testing.TB) string {
	t.Helper()
	stripeMockOnce.Do(func() { stripeMockURL, stripeMockErr = startStripeMock() })
	if stripeMockErr != nil {
		t.Fatalf("stripe-mock: %v (make test-deps builds it)", stripeMockErr)
	}
	return stripeMockURL
}

func startStripeMock() (string, error) {
	bin := os.Getenv("STRIPE_MOCK")
	if bin == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if !filepath.IsAbs(cache) {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		bin = filepath.Join(cache, "videogen", "stripe-mock-v0.203.0", "stripe-mock")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	httpAddr, err := freeAddr()
	if err != nil {
		return "", err
	}
	httpsAddr, err := freeAddr()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, "-http-addr", httpAddr, "-https-addr", httpsAddr)
	// Killed with the test binary, whatever way it ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	listening := poll(30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", httpAddr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
	if listening {
		return "http://" + httpAddr, nil
	}
	_ = cmd.Process.Kill()
	return "", fmt.Errorf("did not start listening on %s: %s", httpAddr, out.String())
}

// StripeCall is one request the server made to Stripe's API.
type StripeCall struct {
	Method, Path   string
	Form           url.Values // the form-encoded body (Stripe's request format) or query
	IdempotencyKey string
	Authorization  string
}

// StripeFront stands in front of stripe-mock for one test: it records every call and answers the paths a
// test sets itself (a list of refunds, sessions or payment intents with the amounts the test needs, or
// an error) in Stripe's own wire format; everything else goes on to stripe-mock.
type StripeFront struct {
	URL string

	mu    sync.Mutex
	calls []StripeCall
	fixed map[string]func(w http.ResponseWriter, r *http.Request)
}

// NewStripeFront starts a front for the test.
func NewStripeFront(t testing.TB) *StripeFront {
	t.Helper()
	target, _ := url.Parse(StripeMockURL(t))
	proxy := httputil.NewSingleHostReverseProxy(target)
	f := &StripeFront{fixed: map[string]func(http.ResponseWriter, *http.Request){}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		if r.Method == http.MethodGet {
			form = r.URL.Query()
		}
		f.mu.Lock()
		f.calls = append(f.calls, StripeCall{Method: r.Method, Path: r.URL.Path, Form: form,
			IdempotencyKey: r.Header.Get("Idempotency-Key"), Authorization: r.Header.Get("Authorization")})
		h := f.fixed[r.Method+" "+r.URL.Path]
		f.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Handle answers method+" "+path (e.g. "GET /v1/refunds") with h from now on.
func (f *StripeFront) Handle(route string, h func(w http.ResponseWriter, r *http.Request)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fixed[route] = h
}

// Object answers route with one Stripe object, as Stripe's API answers a GET of it.
func (f *StripeFront) Object(route string, object map[string]any) {
	f.Handle(route, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(object)
	})
}

// List answers route with one page of a Stripe list of objects; with pageSize > 0 it pages through them
// by starting_after, as Stripe does.
func (f *StripeFront) List(route string, objects []map[string]any, pageSize int) {
	f.Handle(route, func(w http.ResponseWriter, r *http.Request) {
		start := 0
		if after := r.URL.Query().Get("starting_after"); after != "" {
			for i, o := range objects {
				if o["id"] == after {
					start = i + 1
				}
			}
		}
		end := len(objects)
		if pageSize > 0 && start+pageSize < end {
			end = start + pageSize
		}
		page := objects[start:end]
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "url": r.URL.Path, "has_more": end < len(objects), "data": page})
	})
}

// Calls returns the calls so far whose path starts with prefix.
func (f *StripeFront) Calls(prefix string) []StripeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []StripeCall
	for _, c := range f.calls {
		if strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

// StripeEnv is the server settings that point it at front with the test keys.
func (f *StripeFront) Env() map[string]string {
	return map[string]string{"STRIPE_SECRET_KEY": StripeKey, "STRIPE_WEBHOOK_SECRET": StripeWebhookSecret, "STRIPE_API_BASE": f.URL}
}

// StripeEvent builds a webhook event of typ about object, as Stripe sends it for API version 2023-10-16.
func StripeEvent(id, typ string, object map[string]any) []byte {
	b, err := json.Marshal(map[string]any{
		"id": id, "object": "event", "api_version": StripeAPIVersion, "created": time.Now().Unix(), "livemode": false,
		"pending_webhooks": 1, "type": typ, "data": map[string]any{"object": object},
		"request": map[string]any{"id": nil, "idempotency_key": nil},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// SignStripe returns the Stripe-Signature header for payload, signed now with secret.
func SignStripe(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

// PostStripeEvent delivers a signed event to the server's webhook endpoint and returns the answer.
func (s *Server) PostStripeEvent(t testing.TB, payload []byte) *Resp {
	t.Helper()
	return s.PostStripeRaw(t, payload, SignStripe(payload, StripeWebhookSecret, time.Now()))
}

// PostStripeRaw delivers payload with the given Stripe-Signature header.
func (s *Server) PostStripeRaw(t testing.TB, payload []byte, signature string) *Resp {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/stripe", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if signature != "" {
		req.Header.Set("Stripe-Signature", signature)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post Stripe event: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return &Resp{Status: res.StatusCode, Header: res.Header, Body: body}
}
