package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/handlers/web"
	"videogen/internal/domain/webhooks"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestWebhooksFairToEveryAccount: account B has ten endpoints that never answer and queues 100 test
// events to them; account A's test event to its answering endpoint is still delivered within 5 s, and
// B never holds more than its share (4) of the instance's attempts (docs/webhooks.md, "Fair to every
// account"). Before the deliveries were River jobs with a share per account, B's ten-second timeouts
// held all 16 slots and A waited about a minute.
func TestWebhooksFairToEveryAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		var held, maxHeld atomic.Int32
		release := make(chan struct{})
		rcv := &hookReceiver{answer: func(d delivery) int {
			if !strings.HasPrefix(d.Path, "/b") {
				return http.StatusOK
			}
			n := held.Add(1)
			for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
			}
			defer held.Add(-1)
			select { // never answers: the sender gives up (10 s) or the test ends
			case <-d.Done:
			case <-release:
			}
			return http.StatusOK
		}}
		s, _ := startHooks(t, dbURL, nil, rcv)
		defer close(release)
		ctx := context.Background()
		a, b := s.NewAccount(t, "1"), s.NewAccount(t, "1")
		var dead []string
		for i := range webhooks.MaxEndpoints {
			ep, _, err := s.Webhooks.Add(ctx, b.ID, fmt.Sprintf("https://hooks.example.com/b%d", i), webhooks.EventTypes)
			if err != nil {
				t.Fatal(err)
			}
			dead = append(dead, ep.ID)
		}
		for i := range 100 {
			if err := s.Webhooks.SendTest(ctx, b.ID, dead[i%len(dead)], webhooks.VideoCompleted); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(t, 10*time.Second, "B's endpoints holding its attempts", func() bool { return held.Load() >= 4 })
		ep, _, err := s.Webhooks.Add(ctx, a.ID, "https://hooks.example.com/a", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		if err := s.Webhooks.SendTest(ctx, a.ID, ep.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "A's test event delivered within 5 s", func() bool {
			for _, d := range rcv.deliveries() {
				if d.Path == "/a" {
					return true
				}
			}
			return false
		})
		t.Logf("A's event arrived %s after it was sent, with %d of B's attempts held", time.Since(sent).Round(time.Millisecond), held.Load())
		if m := maxHeld.Load(); m > 4 {
			t.Errorf("B held %d attempts at once, want at most 4 of the instance's 16", m)
		}
	})
}

// TestWebhookSendsLimited: an account sends at most 10 test events and resends a minute, counted
// together across the console and the API; the 11th is refused 429 with the wait in words and
// Retry-After, and sends nothing; another account is not held back by it.
func TestWebhookSendsLimited(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		s, _ := startHooks(t, dbURL, nil, rcv)
		email := "sends-" + strings.ToLower(t.Name()[len(t.Name())-6:]) + "@example.com"
		b := signUpVerified(t, s, email)
		added := b.submit("/console/webhooks", "url", url.Values{"url": {"https://hooks.example.com/in"}, "events": {"video.completed"}})
		m := endpointLinkRE.FindStringSubmatch(b.get("/console/webhooks").Body)
		if added.Status != 200 || m == nil {
			t.Fatalf("adding an endpoint: %d", added.Status)
		}
		id := m[1]
		for i := 1; i <= web.WebhookSendsPerMinute; i++ {
			if p := b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/test", url.Values{"type": {"video.completed"}}); p.Status != 303 {
				t.Fatalf("test event %d: %d", i, p.Status)
			}
		}
		refused := b.post("/console/webhooks/"+id, "/console/webhooks/"+id+"/test", url.Values{"type": {"video.completed"}})
		if refused.Status != http.StatusTooManyRequests || refused.Header.Get("Retry-After") == "" {
			t.Fatalf("the 11th test event in a minute: %d, Retry-After %q", refused.Status, refused.Header.Get("Retry-After"))
		}
		refused.contains(t, "sent 10 test events and resends in the last minute", "Send the next one in ")
		testkit.Eventually(t, 10*time.Second, "the ten test events", func() bool { return len(rcv.deliveries()) == 10 })

		// A resend counts too.
		var d models.WebhookDelivery
		if err := s.DB.R.Where("endpoint_id = ?", id).Order("id").First(&d).Error; err != nil {
			t.Fatal(err)
		}
		if p := b.post("/console/webhooks/"+id, fmt.Sprintf("/console/webhooks/%s/deliveries/%d/resend", id, d.ID), url.Values{}); p.Status != http.StatusTooManyRequests {
			t.Errorf("a resend past the limit: %d", p.Status)
		}

		// The API's test of the same account is refused the same way; another account's is not.
		key := scopedKey(t, b, "hooks")
		r := testkit.Do(t, s.URL, "POST", "/v1/webhook_endpoints/"+id+"/test", key, map[string]any{"event_type": "video.completed"})
		if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"rate_limited"`) || !strings.Contains(string(r.Body), "Send the next one in") {
			t.Errorf("the API's test past the limit: %d %s", r.Status, r.Body)
		}
		otherEmail := "other-" + email
		ob := signUpVerified(t, s, otherEmail)
		otherKey := scopedKey(t, ob, "hooks")
		var other models.User
		if err := s.DB.R.Where("email = ?", otherEmail).Take(&other).Error; err != nil {
			t.Fatal(err)
		}
		ep, _, err := s.Webhooks.Add(context.Background(), other.AccountID, "https://hooks.example.com/other", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		if r := testkit.Do(t, s.URL, "POST", "/v1/webhook_endpoints/"+ep.ID+"/test", otherKey, map[string]any{"event_type": "video.completed"}); r.Status != 200 {
			t.Errorf("another account's test: %d %s", r.Status, r.Body)
		}
	})
}
