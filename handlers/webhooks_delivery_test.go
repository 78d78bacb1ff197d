package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/webhooks"
	"videogen/internal/infra/mediafetch"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// hookReceiver is a customer's webhook endpoint: it keeps every request as it arrived, and answers with
// the status its answer function gives (200 by default).
type hookReceiver struct {
	mu     sync.Mutex
	got    []delivery
	answer func(d delivery) int
}

// delivery is one request as the receiver got it.
type delivery struct {
	Header http.Header
	Body   []byte
	At     time.Time
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{Header: req.Header.Clone(), Body: body, At: time.Now()}
	r.mu.Lock()
	r.got = append(r.got, d)
	answer := r.answer
	r.mu.Unlock()
	status := http.StatusOK
	if answer != nil {
		status = answer(d)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"received":true}`)
}

func (r *hookReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// startHooks serves a receiver at https://hooks.example.com/ (a real TLS server on a loopback address
// that the policy's DNS names and that alone exempts from the guard) and starts videogen with that
// policy, as the import tests do.
func startHooks(t *testing.T, dbURL string, over map[string]string, rcv *hookReceiver) (*testkit.Server, mediafetch.Policy) {
	t.Helper()
	policy := testkit.ServeHTTPSHost(t, "hooks.example.com", rcv)
	env := map[string]string{"SIM_DURATION": "100ms"}
	for k, v := range over {
		env[k] = v
	}
	return testkit.StartWith(t, dbURL, env, server.Options{ImportPolicy: &policy}), policy
}

// TestWebhooksVerifiedByOpenAIGo: a video that completes and one that fails are each delivered once, to
// the endpoint that asked for them, shaped as OpenAI's events and signed so that openai-go's
// client.Webhooks.Unwrap, unmodified, verifies and parses them; a tampered body, a wrong secret and a
// timestamp older than 5 minutes are refused by it (openai-go webhooks/webhook_helpers.go).
func TestWebhooksVerifiedByOpenAIGo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		s, _ := startHooks(t, dbURL, nil, rcv)
		acct := s.NewAccount(t, "10")
		ctx := context.Background()
		ep, secret, err := s.Webhooks.Add(ctx, acct.ID, "https://hooks.example.com/openai", []string{webhooks.VideoCompleted, webhooks.VideoFailed})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(secret, "whsec_") || strings.Contains(ep.SecretHint, secret) {
			t.Fatalf("secret %q, hint %q", secret, ep.SecretHint)
		}

		done := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a lighthouse"})
		failing := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "[sim:fail] a storm"})
		s.WaitStatus(t, acct.Key, done["id"].(string), 30*time.Second, "completed")
		s.WaitStatus(t, acct.Key, failing["id"].(string), 30*time.Second, "failed")
		testkit.Eventually(t, 20*time.Second, "two deliveries", func() bool { return len(rcv.deliveries()) >= 2 })

		client := openai.NewClient(option.WithWebhookSecret(secret), option.WithAPIKey("unused"))
		byVideo := map[string]string{}
		for _, d := range rcv.deliveries() {
			if ct := d.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			ev, err := client.Webhooks.Unwrap(d.Body, d.Header)
			if err != nil {
				t.Fatalf("openai-go refused our delivery: %v\nheaders %v\nbody %s", err, d.Header, d.Body)
			}
			if ev.Object != "event" || !strings.HasPrefix(ev.ID, "evt_") || ev.ID != d.Header.Get("webhook-id") || ev.CreatedAt == 0 {
				t.Errorf("event %s", d.Body)
			}
			var body struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			_ = json.Unmarshal(d.Body, &body)
			byVideo[body.Data.ID] = ev.Type

			// What openai-go must refuse.
			tampered := []byte(strings.Replace(string(d.Body), `"object":"event"`, `"object":"event" `, 1))
			if _, err := client.Webhooks.Unwrap(tampered, d.Header); err == nil {
				t.Error("a tampered body verified")
			}
			wrong := openai.NewClient(option.WithWebhookSecret("whsec_"+strings.Repeat("A", 43)+"="), option.WithAPIKey("unused"))
			if _, err := wrong.Webhooks.Unwrap(d.Body, d.Header); err == nil {
				t.Error("a wrong secret verified")
			}
			if err := client.Webhooks.VerifySignatureWithToleranceAndTime(d.Body, d.Header, 5*time.Minute, d.At.Add(6*time.Minute)); err == nil {
				t.Error("a delivery 6 minutes old verified")
			}
		}
		want := map[string]string{done["id"].(string): "video.completed", failing["id"].(string): "video.failed"}
		for id, typ := range want {
			if byVideo[id] != typ {
				t.Errorf("video %s: event %q, want %q (all: %v)", id, byVideo[id], typ, byVideo)
			}
		}
		// Each delivered once, its attempt recorded with the answer's status and first bytes.
		testkit.Eventually(t, 10*time.Second, "attempts recorded", func() bool {
			var n int64
			s.DB.R.Model(&models.WebhookAttempt{}).Where("endpoint_id = ? AND status = 200", ep.ID).Count(&n)
			return n == 2
		})
		if got := len(rcv.deliveries()); got != 2 {
			t.Errorf("%d deliveries, want 2", got)
		}
		page, err := s.Webhooks.Attempts(ctx, ep.ID, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Attempts) != 2 || page.Attempts[0].Response != `{"received":true}` || !page.Attempts[0].Delivered {
			t.Errorf("attempts %+v", page.Attempts)
		}
	})
}
