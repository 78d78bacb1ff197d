package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	vgclient "videogen/client"
	"videogen/internal/domain/apispec"
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
	Path   string
	Done   <-chan struct{} // closed when the sender gives up on the request
	Header http.Header
	Body   []byte
	At     time.Time
}

func (r *hookReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	d := delivery{Path: req.URL.Path, Done: req.Context().Done(), Header: req.Header.Clone(), Body: body, At: time.Now()}
	r.mu.Lock()
	r.got = append(r.got, d)
	answer := r.answer
	r.mu.Unlock()
	status := http.StatusOK
	if answer != nil {
		status = answer(d)
	}
	if status >= 300 && status < 400 {
		w.Header().Set("Location", "/followed") // a redirect that must not be followed
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
		doc, err := apispec.Load()
		if err != nil {
			t.Fatal(err)
		}
		schema := doc.Components.Schemas["WebhookEvent"].Value
		for _, d := range rcv.deliveries() {
			// The body is what the OpenAPI document's webhooks: section says.
			var decoded any
			if err := json.Unmarshal(d.Body, &decoded); err != nil {
				t.Fatal(err)
			}
			if err := schema.VisitJSON(decoded); err != nil {
				t.Errorf("the delivery does not match the documented WebhookEvent: %v\n%s", err, d.Body)
			}
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

			// Our own Go client's helper (client.VerifyWebhook) agrees on each.
			got, err := vgclient.VerifyWebhook(d.Body, d.Header, secret, d.At)
			if err != nil || got.ID != ev.ID || got.Type != ev.Type || got.Data.ID == "" {
				t.Errorf("client.VerifyWebhook: %+v, %v", got, err)
			}
			for name, check := range map[string]func() error{
				"tampered": func() error { _, err := vgclient.VerifyWebhook(tampered, d.Header, secret, d.At); return err },
				"wrong": func() error {
					_, err := vgclient.VerifyWebhook(d.Body, d.Header, "whsec_"+strings.Repeat("A", 43)+"=", d.At)
					return err
				},
				"6 min old": func() error {
					_, err := vgclient.VerifyWebhook(d.Body, d.Header, secret, d.At.Add(6*time.Minute))
					return err
				},
			} {
				if err := check(); !errors.Is(err, vgclient.ErrWebhookSignature) {
					t.Errorf("client.VerifyWebhook, %s: %v", name, err)
				}
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

// collectDeliveries starts a server with an endpoint for both events, makes a video complete and one
// fail, and returns their two deliveries as received, with the endpoint's secret.
func collectDeliveries(t *testing.T, dbURL string) ([]delivery, string) {
	t.Helper()
	rcv := &hookReceiver{}
	s, _ := startHooks(t, dbURL, nil, rcv)
	acct := s.NewAccount(t, "10")
	_, secret, err := s.Webhooks.Add(context.Background(), acct.ID, "https://hooks.example.com/in", webhooks.EventTypes)
	if err != nil {
		t.Fatal(err)
	}
	done := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a lighthouse"})
	failing := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "[sim:fail] a storm"})
	s.WaitStatus(t, acct.Key, done["id"].(string), 30*time.Second, "completed")
	s.WaitStatus(t, acct.Key, failing["id"].(string), 30*time.Second, "failed")
	testkit.Eventually(t, 20*time.Second, "two deliveries", func() bool { return len(rcv.deliveries()) == 2 })
	return rcv.deliveries(), secret
}

// TestWebhooksVerifiedByOpenAINode: the OpenAI Node SDK's client.webhooks.unwrap, unmodified
// (testdata/openai-node/webhook_check.mjs), verifies and parses our deliveries, and refuses a tampered
// body, a wrong secret and a delivery older than 5 minutes (openai-node resources/webhooks/webhooks.js).
func TestWebhooksVerifiedByOpenAINode(t *testing.T) {
	dir := testkit.OpenAINodeDir(t)
	got, secret := collectDeliveries(t, testkit.SQLiteURL(t))
	type in struct {
		Body    string            `json:"body"`
		Headers map[string]string `json:"headers"`
	}
	input := struct {
		Secret     string `json:"secret"`
		Deliveries []in   `json:"deliveries"`
	}{Secret: secret}
	for _, d := range got {
		h := map[string]string{}
		for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "content-type"} {
			h[k] = d.Header.Get(k)
		}
		input.Deliveries = append(input.Deliveries, in{Body: string(d.Body), Headers: h})
	}
	stdin, _ := json.Marshal(input)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // guards against a hang only
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "webhook_check.mjs")
	cmd.Dir, cmd.Stdin = dir, bytes.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("the Node SDK refused our deliveries: %v\n%s%s", err, out, stderr)
	}
	var saw struct {
		Events []struct{ ID, Type, Object, Video, WebhookID string }
	}
	if err := json.Unmarshal(out, &saw); err != nil {
		t.Fatalf("the Node check printed %q: %v", out, err)
	}
	types := map[string]bool{}
	for _, e := range saw.Events {
		if e.Object != "event" || e.ID != e.WebhookID || !strings.HasPrefix(e.Video, "video_") {
			t.Errorf("the Node SDK unwrapped %+v", e)
		}
		types[e.Type] = true
	}
	if len(saw.Events) != 2 || !types["video.completed"] || !types["video.failed"] {
		t.Errorf("the Node SDK unwrapped %+v", saw.Events)
	}
}

// TestWebhookShellVerification runs the shell lines of docs/webhooks.md ("A plain HMAC in a shell"),
// exactly as written there, on a real delivery: they print "verified", and "NOT verified" for a tampered
// body.
func TestWebhookShellVerification(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "### A plain HMAC in a shell")
	_, rest, ok2 := strings.Cut(rest, "```sh\n")
	script, _, ok3 := strings.Cut(rest, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/webhooks.md has no shell block under \"A plain HMAC in a shell\"")
	}
	got, secret := collectDeliveries(t, testkit.SQLiteURL(t))
	for _, d := range got {
		for _, tc := range []struct {
			body []byte
			want string
		}{{d.Body, "verified\n"}, {append(append([]byte(nil), d.Body...), ' '), "NOT verified\n"}} {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "body.json"), tc.body, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "ID="+d.Header.Get("webhook-id"), "TS="+d.Header.Get("webhook-timestamp"),
				"SIG="+d.Header.Get("webhook-signature"), "SECRET="+secret)
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != tc.want {
				t.Errorf("the documented shell lines printed %q (%v), want %q", out, err, tc.want)
			}
		}
	}
}
