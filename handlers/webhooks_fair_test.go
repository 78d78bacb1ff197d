package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/webhooks"
	"videogen/internal/testkit"
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
