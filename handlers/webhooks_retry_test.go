package handlers_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/webhooks"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// movableClock is a clock the test moves forward.
type movableClock struct{ off atomic.Int64 }

func (c *movableClock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *movableClock) moveTo(t time.Time) {
	c.off.Store(int64(time.Until(t)) + int64(time.Millisecond))
}
func (c *movableClock) Now() func() time.Time           { return c.now }
func (c *movableClock) advance(d time.Duration)         { c.off.Add(int64(d)) }
func (c *movableClock) since(t time.Time) time.Duration { return c.now().Sub(t) }

// TestWebhookRetriesThenDisables: an endpoint that always answers 500 is retried after each wait of the
// documented schedule (docs/webhooks.md#delivery-and-retries), ten attempts in all, each with the same
// webhook-id; once it has failed for 3 days it is disabled and the account's owner is e-mailed, and the
// delivery is given up. The clock is moved, not waited for.
func TestWebhookRetriesThenDisables(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{answer: func(delivery) int { return http.StatusInternalServerError }}
		policy := testkit.ServeHTTPSHost(t, "hooks.example.com", rcv)
		clock := &movableClock{}
		s := testkit.StartWith(t, dbURL, nil, server.Options{ImportPolicy: &policy, Now: clock.Now()})
		acct := s.NewAccount(t, "1")
		ctx := context.Background()
		ep, _, err := s.Webhooks.Add(ctx, acct.ID, "https://hooks.example.com/down", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Webhooks.SendTest(ctx, acct.ID, ep.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		start := clock.now()
		for n := 1; n <= len(webhooks.DefaultSchedule)+1; n++ {
			testkit.Eventually(t, 10*time.Second, "attempt "+itoa(n), func() bool { return len(rcv.deliveries()) == n })
			var d models.WebhookDelivery
			testkit.Eventually(t, 10*time.Second, "attempt "+itoa(n)+" recorded", func() bool {
				var a int64
				s.DB.R.Model(&models.WebhookAttempt{}).Where("endpoint_id = ?", ep.ID).Count(&a)
				return a == int64(n) && s.DB.R.Where("endpoint_id = ?", ep.ID).Take(&d).Error == nil && d.Attempts == n
			})
			if n <= len(webhooks.DefaultSchedule) {
				if d.NextAttemptAt == nil {
					t.Fatalf("after attempt %d: no retry planned", n)
				}
				var a models.WebhookAttempt
				s.DB.R.Where("endpoint_id = ? AND attempt = ?", ep.ID, n).Take(&a)
				if wait := d.NextAttemptAt.Sub(a.At); wait < webhooks.DefaultSchedule[n-1] || wait > webhooks.DefaultSchedule[n-1]+5*time.Second {
					t.Errorf("after attempt %d the wait is %s, want %s", n, wait, webhooks.DefaultSchedule[n-1])
				}
				clock.moveTo(*d.NextAttemptAt)
				continue
			}
			if d.NextAttemptAt != nil || d.FailedAt == nil {
				t.Errorf("after the last attempt: %+v", d)
			}
		}
		if elapsed := clock.since(start); elapsed < 72*time.Hour || elapsed > 73*time.Hour {
			t.Errorf("the attempts spanned %s, want about 3 days", elapsed)
		}
		got := rcv.deliveries()
		for _, d := range got {
			if d.Header.Get("webhook-id") != got[0].Header.Get("webhook-id") || string(d.Body) != string(got[0].Body) {
				t.Fatalf("a retry is another message: %s vs %s", d.Header.Get("webhook-id"), got[0].Header.Get("webhook-id"))
			}
		}
		var cur models.WebhookEndpoint
		s.DB.R.Where("id = ?", ep.ID).Take(&cur)
		if cur.Enabled || !strings.Contains(cur.DisabledReason, "every delivery failed since") {
			t.Errorf("after 3 days of failures: enabled %v, reason %q", cur.Enabled, cur.DisabledReason)
		}
		testkit.Eventually(t, 10*time.Second, "the owner's e-mail", func() bool { return mailsTo(s, acct.Email) == 1 })
		m := nextMail(t, s, acct.Email, 0)
		if !strings.Contains(m.Subject, "webhook endpoint was disabled") || !strings.Contains(m.Text, "https://hooks.example.com/down") ||
			!strings.Contains(m.Text, "/console/webhooks/"+ep.ID) || !strings.Contains(m.Text, "500") {
			t.Errorf("e-mail %q:\n%s", m.Subject, m.Text)
		}
		// Disabled: nothing more is attempted, and a test event is refused until it is enabled.
		if err := s.Webhooks.SendTest(ctx, acct.ID, ep.ID, webhooks.VideoFailed); err == nil || !strings.Contains(err.Error(), "Enable it first") {
			t.Errorf("a test event to the disabled endpoint: %v", err)
		}
		clock.advance(time.Hour)
		if n := len(rcv.deliveries()); n != len(webhooks.DefaultSchedule)+1 {
			t.Errorf("a disabled endpoint was attempted: %d attempts", n)
		}
	})
}

// TestSlowEndpointDelaysNoOther: an endpoint that holds every request open has at most two open at a
// time from an instance, and another endpoint's event is delivered while they are held.
func TestSlowEndpointDelaysNoOther(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		release := make(chan struct{})
		var held, maxHeld atomic.Int32
		var once sync.Once
		rcv := &hookReceiver{answer: func(d delivery) int {
			if d.Path != "/slow" {
				return http.StatusOK
			}
			n := held.Add(1)
			for m := maxHeld.Load(); n > m && !maxHeld.CompareAndSwap(m, n); m = maxHeld.Load() {
			}
			defer held.Add(-1)
			select {
			case <-release:
			case <-d.Done: // our attempt gave up (10 s): the request is no longer open
			}
			return http.StatusOK
		}}
		s, _ := startHooks(t, dbURL, nil, rcv)
		defer once.Do(func() { close(release) })
		acct := s.NewAccount(t, "1")
		ctx := context.Background()
		slow, _, err := s.Webhooks.Add(ctx, acct.ID, "https://hooks.example.com/slow", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		fast, _, err := s.Webhooks.Add(ctx, acct.ID, "https://hooks.example.com/fast", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		for range 6 {
			if err := s.Webhooks.SendTest(ctx, acct.ID, slow.ID, webhooks.VideoCompleted); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(t, 10*time.Second, "the slow endpoint holding two requests", func() bool { return held.Load() == 2 })
		if err := s.Webhooks.SendTest(ctx, acct.ID, fast.ID, webhooks.VideoCompleted); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the other endpoint's delivery", func() bool {
			for _, d := range rcv.deliveries() {
				if d.Path == "/fast" {
					return true
				}
			}
			return false
		})
		if h := held.Load(); h == 0 {
			t.Error("the slow endpoint's requests were no longer held when the other's arrived")
		}
		once.Do(func() { close(release) })
		if m := maxHeld.Load(); m > 2 {
			t.Errorf("%d requests at once to one endpoint, want at most 2", m)
		}
	})
}
