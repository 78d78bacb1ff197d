package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/server"
	"videogen/internal/testkit"
)

// TestTaskStatusEndpoint: GET /console/tasks/{id}/status, what the live task pages poll, answers the
// signed-in account's task as JSON with the openai-poll-after-ms header GET /v1/videos/{id} sends at the
// same moment (1 s for a new task, longer as it ages), never cached; another account's task and an
// unknown id are the API's 404 not_found; without a session it sends the browser to sign in. Once the
// task has failed it says so (done, released), and the task page shows the refund in figures.
func TestTaskStatusEndpoint(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// A clock that moves only when the test moves it: the two answers compared are read at one instant.
		var clock stoppedClock
		clock.at.Store(time.Now().UnixNano())
		// No worker: the task stays queued until the test ends it.
		s := testkit.StartWith(t, dbURL, map[string]string{"TEST_TOPUPS": "1", "WORKERS": "false"}, server.Options{Now: clock.now})
		b := signUpVerified(t, s, "live@example.com")
		addFunds(t, b, "10")
		key := createKey(t, b, "live")
		id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite over the dunes"})["id"].(string)

		type status struct {
			ID           string `json:"id"`
			Status       string `json:"status"`
			Progress     int    `json:"progress"`
			Done         bool   `json:"done"`
			BillingState string `json:"billing_state"`
			Amount       string `json:"amount"`
		}
		read := func(want string) status {
			t.Helper()
			p := b.get("/console/tasks/" + id + "/status")
			if p.Status != 200 || !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") || p.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("status: %d %q %q %s", p.Status, p.Header.Get("Content-Type"), p.Header.Get("Cache-Control"), p.Body)
			}
			if !strings.Contains(p.Header.Get("Content-Security-Policy"), "script-src 'self'") {
				t.Errorf("the status answer lacks the console's security headers: %q", p.Header.Get("Content-Security-Policy"))
			}
			api := s.Do(t, "GET", "/v1/videos/"+id, key, nil)
			if got, sent := p.Header.Get("openai-poll-after-ms"), api.Header.Get("openai-poll-after-ms"); got != want || sent != want {
				t.Errorf("openai-poll-after-ms: console %q, API %q; want %q from both", got, sent, want)
			}
			var st status
			if err := json.Unmarshal([]byte(p.Body), &st); err != nil {
				t.Fatalf("status body %s: %v", p.Body, err)
			}
			return st
		}
		if st := read("1000"); st != (status{ID: id, Status: "queued", BillingState: "reserved", Amount: "$0.20"}) {
			t.Fatalf("a new task: %+v", st)
		}
		// The pages that follow it: the task's own, the Tasks list and the dashboard's Recent videos carry
		// what static/tasks.js reads, and load it; the reload hint stays for browsers without it.
		b.get("/console/tasks/"+id).contains(t, `<div class="task-live" data-task-id="`+id+`" data-task-status="queued">`,
			`data-task-field="status"`, `data-task-field="progress"`, `<span class="live-nojs">Reload this page to follow it.</span>`,
			`<script src="/static/tasks.js" defer></script>`)
		for _, page := range []string{"/console/tasks", "/console"} {
			b.get(page).contains(t, `<tr data-task-id="`+id+`" data-task-status="queued">`, `<span class="badge queued" data-task-field="status">queued</span>`,
				`<span class="muted small" data-task-field="progress">0%</span>`, `data-task-field="amount"`, `<script src="/static/tasks.js" defer></script>`)
		}
		if js := b.get("/static/tasks.js"); js.Status != 200 || !strings.Contains(js.Header.Get("Content-Type"), "javascript") {
			t.Fatalf("/static/tasks.js: %d %q", js.Status, js.Header.Get("Content-Type"))
		}
		// An older task is polled less often, as the API advises.
		clock.advance(50 * time.Second)
		read("10000")
		clock.advance(10 * time.Minute)
		read("15000")

		// Only the account's own tasks, as the page.
		other := signUpVerified(t, s, "someone.else@example.com")
		for _, path := range []string{"/console/tasks/" + id + "/status", "/console/tasks/video_" + strings.Repeat("Z", 24) + "/status", "/console/tasks/nonsense/status"} {
			p := other.get(path)
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			if p.Status != 404 || json.Unmarshal([]byte(p.Body), &body) != nil || body.Error.Code != "not_found" || strings.Contains(p.Body, "kite") {
				t.Errorf("%s for another account: %d %s", path, p.Status, p.Body)
			}
		}
		if p := newBrowser(t, s).get("/console/tasks/" + id + "/status"); p.Status != 303 || !strings.HasPrefix(p.location(), "/signin") {
			t.Errorf("without a session: %d → %q", p.Status, p.location())
		}

		// The task fails: the status says it is over, and the page shows the refund with its amount.
		task := testkit.Task(t, s.DB, id)
		if err := s.Tasks.Fail(context.Background(), &task, "generation_failed", "The generation failed. Your reservation was released. You can create the task again."); err != nil {
			t.Fatal(err)
		}
		if st := read("15000"); st.Status != "failed" || !st.Done || st.BillingState != "released" {
			t.Fatalf("a failed task: %+v", st)
		}
		page := b.get("/console/tasks/" + id)
		page.contains(t, `data-task-id="`+id+`"`, `data-task-status="failed"`,
			"Refunded: the $0.20 reserved for this video is back in your available balance. Nothing was charged.")
		page.lacks(t, "Reload this page")
	})
}

// stoppedClock is a clock that stands still until the test moves it.
type stoppedClock struct{ at atomic.Int64 }

func (c *stoppedClock) now() time.Time          { return time.Unix(0, c.at.Load()) }
func (c *stoppedClock) advance(d time.Duration) { c.at.Add(int64(d)) }
