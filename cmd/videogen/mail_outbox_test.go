package main_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"videogen/internal/infra/mail"
	"videogen/internal/testkit"
	"videogen/models"
)

// deliveringResend is a stand-in for Resend's API that holds the first request it gets until released (a
// send in flight when the server dies) and answers the others. Like Resend, it delivers a message once
// per idempotency key.
type deliveringResend struct {
	mu        sync.Mutex
	attempts  []string            // idempotency key of every request, in order
	delivered map[string][]string // recipient → keys delivered
	hold      chan struct{}       // closed to release the first request
	held      chan string         // receives the first request's key
}

func (f *deliveringResend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		To []string `json:"to"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	key := r.Header.Get("Idempotency-Key")
	f.mu.Lock()
	f.attempts = append(f.attempts, key)
	first := len(f.attempts) == 1
	f.mu.Unlock()
	if first {
		f.held <- key
		<-f.hold
		return // the server that sent it is gone by now
	}
	f.mu.Lock()
	if len(body.To) == 1 && !contains(f.delivered[body.To[0]], key) {
		f.delivered[body.To[0]] = append(f.delivered[body.To[0]], key)
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"id":"4ef9a417-02e9-4d39-ad75-9611e0fcc33c"}`))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (f *deliveringResend) deliveredTo(to string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.delivered[to]...)
}

// TestQueuedMailSurvivesACrash: the verification e-mail of a sign-up is in flight to the mail provider
// when the server is killed with SIGKILL; after a restart it is delivered, once, with the same
// idempotency key, and recorded sent once (docs/jobs.md, "E-mail").
func TestQueuedMailSurvivesACrash(t *testing.T) {
	fake := &deliveringResend{delivered: map[string][]string{}, hold: make(chan struct{}), held: make(chan string, 1)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	defer close(fake.hold)
	dir := t.TempDir()
	// A short lease: River gives a dead instance's running job to a live one after two of them.
	env := map[string]string{"RESEND_API_KEY": "re_test_key_123", "RESEND_API_BASE": srv.URL, "LOG_LEVEL": "warn", "LEASE_DURATION": "4s"}
	p := serve(t, dir, env)
	const email = "crash-mail@example.com"
	signUpThroughForm(t, p.url, email)
	var firstKey string
	select {
	case firstKey = <-fake.held:
	case <-time.After(10 * time.Second):
		t.Fatalf("the verification e-mail never reached the provider:\n%s", p.stderr.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	// The crash left the e-mail unrecorded and its job running, held by the dead instance. River's rescuer,
	// on the instance elected once the dead one's leadership lapses, gives it back after two leases.
	d := openInstallation(t, dir, env)
	var row models.MailOutbox
	if err := d.R.Where("recipient = ?", email).Take(&row).Error; err != nil || row.SentAt != nil {
		t.Fatalf("the e-mail's record after the crash: %+v, %v", row, err)
	}
	var running int64
	if err := d.R.Table("river_job").Where("state = 'running' AND kind = ?", mail.SendArgs{}.Kind()).Count(&running).Error; err != nil || running != 1 {
		t.Fatalf("the e-mail's running job after the crash: %d, %v", running, err)
	}
	_ = d.Close()

	p = serve(t, dir, env)
	testkit.Eventually(t, 90*time.Second, "the e-mail delivered after the restart", func() bool { return len(fake.deliveredTo(email)) > 0 },
		func() string { return p.stderr.String() })
	if got := fake.deliveredTo(email); len(got) != 1 || got[0] != firstKey {
		t.Fatalf("delivered with keys %v; want exactly the key of the attempt cut by the crash, %q", got, firstKey)
	}
	// Recorded sent, so no later round sends it again (a repeat of its job finds it sent).
	signUpThroughForm(t, p.url, "someone-else@example.com")
	testkit.Eventually(t, 20*time.Second, "a later e-mail delivered", func() bool {
		return len(fake.deliveredTo("someone-else@example.com")) > 0
	}, func() string { return p.stderr.String() })
	d = openInstallation(t, dir, env)
	defer d.Close()
	if err := d.R.Where("recipient = ?", email).Take(&row).Error; err != nil || row.SentAt == nil || row.SealedBody != nil {
		t.Fatalf("the e-mail's record after delivery: sent_at %v, body kept %v, %v", row.SentAt, row.SealedBody != nil, err)
	}
	fake.mu.Lock()
	n := 0
	for _, k := range fake.attempts {
		if k == firstKey {
			n++
		}
	}
	fake.mu.Unlock()
	if n != 2 {
		t.Fatalf("the crashed e-mail was attempted %d times, want 2 (the cut attempt and one after the restart)", n)
	}
	if strings.Contains(p.stderr.String(), "re_test_key_123") {
		t.Fatal("the Resend key reached the log")
	}
}
