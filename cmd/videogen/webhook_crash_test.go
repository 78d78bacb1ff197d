package main_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"videogen/internal/domain/webhooks"
	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/queue"
	"videogen/internal/testkit"
	"videogen/models"
)

// crashReceiver is a customer's endpoint (plain http on this machine: the development allowance) that
// holds the first deliveries open until told to answer, and records every request.
type crashReceiver struct {
	mu       sync.Mutex
	hold     bool
	released chan struct{}
	held     chan struct{} // a signal per request held
	got      []string      // webhook-id of every request, in order
	answered map[string]bool
}

func (r *crashReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.ReadAll(req.Body)
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	r.got = append(r.got, id)
	hold := r.hold
	r.mu.Unlock()
	if hold {
		select {
		case r.held <- struct{}{}:
		default:
		}
		select {
		case <-r.released:
		case <-req.Context().Done(): // the sender died
			return
		}
	}
	r.mu.Lock()
	r.answered[id] = true
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// TestWebhooksSurviveACrash: SIGKILL while deliveries are in flight (the receiver holds them open), then a
// new instance on the same database: every event is delivered at least once, each always with its one
// webhook-id, and each video has exactly one event (docs/webhooks.md#delivery-and-retries).
func TestWebhooksSurviveACrash(t *testing.T) {
	rcv := &crashReceiver{hold: true, released: make(chan struct{}), held: make(chan struct{}, 16), answered: map[string]bool{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	defer close(rcv.released)

	dir := t.TempDir()
	const secret = "crash-test-app-secret-0123456789abcdef0123456789abcdef"
	env := map[string]string{"APP_SECRET": secret, "LEASE_DURATION": "4s", "SIM_DURATION": "100ms", "LOG_LEVEL": "warn"}
	p := serve(t, dir, env)
	d := testkit.OpenDB(t, databaseOf(dir, env))
	acct := testkit.NewAccount(t, d, "20")
	// Only to add the endpoint: this queue inserts nothing and never starts.
	q, err := queue.New(d, queue.Config{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	hooks, err := webhooks.New(d, q, mediafetch.New(mediafetch.Policy{PlainHTTPLoopback: true}), nil,
		slog.New(slog.NewTextHandler(os.Stderr, nil)), webhooks.Config{Secrets: []string{secret}, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	ep, _, err := hooks.Add(context.Background(), acct.ID, srv.URL+"/hooks", webhooks.EventTypes)
	if err != nil {
		t.Fatal(err)
	}

	const videos = 12
	ids := map[string]bool{}
	for range videos {
		v := testkit.Do(t, p.url, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a paper boat"})
		if v.Status != 200 {
			t.Fatalf("create: %d %s", v.Status, v.Body)
		}
		ids[v.JSON(t)["id"].(string)] = true
	}
	select {
	case <-rcv.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery reached the receiver:\n%s", p.stderr.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	rcv.mu.Lock()
	cut := append([]string(nil), rcv.got...) // in flight when the instance died
	rcv.hold = false
	rcv.mu.Unlock()

	p = serve(t, dir, env)
	// Every video ends (the new instance takes over the tasks), and every event of them is answered.
	testkit.Eventually(t, 60*time.Second, "every video's event delivered", func() bool {
		var events []models.WebhookEvent
		if d.R.Where("account_id = ?", acct.ID).Find(&events).Error != nil || len(events) != videos {
			return false
		}
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		for _, ev := range events {
			if !rcv.answered[ev.ID] {
				return false
			}
		}
		return true
	}, func() string { return p.stderr.String() })

	var events []models.WebhookEvent
	if err := d.R.Where("account_id = ?", acct.ID).Find(&events).Error; err != nil {
		t.Fatal(err)
	}
	perVideo := map[string]int{}
	known := map[string]bool{}
	for _, ev := range events {
		perVideo[ev.SubjectID]++
		known[ev.ID] = true
		if !ids[ev.SubjectID] {
			t.Errorf("an event about %s, which is not one of the videos", ev.SubjectID)
		}
	}
	for id := range ids {
		if perVideo[id] != 1 {
			t.Errorf("video %s has %d events, want 1", id, perVideo[id])
		}
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	for _, id := range rcv.got {
		if !known[id] {
			t.Errorf("a delivery with webhook-id %q, which is no event's", id)
		}
	}
	for _, id := range cut {
		if !rcv.answered[id] {
			t.Errorf("the delivery %s cut by the crash was never delivered", id)
		}
	}
	rcv.mu.Unlock()
	testkit.Eventually(t, 20*time.Second, "every delivery recorded as delivered", func() bool {
		var undelivered int64
		d.R.Model(&models.WebhookDelivery{}).Where("endpoint_id = ? AND delivered_at IS NULL", ep.ID).Count(&undelivered)
		return undelivered == 0
	})
	rcv.mu.Lock()
	t.Logf("%d deliveries for %d events; %d in flight at the SIGKILL, sent again with the same id", len(rcv.got), len(events), len(cut))
}
