package handlers_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCancelQueuedVideo: DELETE of a task that has not reached a provider (no worker takes it) cancels
// it: OpenAI's video.deleted answer, the task failed with code cancelled and a message naming the key,
// its reservation released at once (reserve then release, the balance back to the micro-dollar), and
// the poll — whose cache held it queued — shows it so. A second DELETE deletes the failed task as any
// finished one; a third is 404.
func TestCancelQueuedVideo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "POLL_CACHE_TTL": "1h"})
		acct := s.NewAccount(t, "10")
		before := balance(t, s, acct.ID)
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite", "seconds": 8})["id"].(string)
		if v := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil).JSON(t); v["status"] != "queued" { // now in the poll cache
			t.Fatalf("before the cancel: %v", v)
		}

		r := s.Do(t, "DELETE", "/v1/videos/"+id, acct.Key, nil)
		if r.Status != 200 || !reflect.DeepEqual(r.JSON(t), map[string]any{"id": id, "object": "video.deleted", "deleted": true}) {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		v := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil).JSON(t)
		e, _ := v["error"].(map[string]any)
		if v["status"] != "failed" || e["code"] != "cancelled" || !strings.Contains(e["message"].(string), "API key "+acct.Key[:10]) ||
			v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("after the cancel the poll shows %v", v)
		}
		es := testkit.Entries(t, s.DB, id)
		if k := testkit.Kinds(es); !reflect.DeepEqual(k, []string{"reserve", "release"}) || es[0].DeltaAvailable != -400_000 || es[1].DeltaAvailable != 400_000 ||
			es[1].DeltaReserved != -400_000 { // 8 s at $0.05
			t.Fatalf("ledger: %v %+v", k, es)
		}
		if after := balance(t, s, acct.ID); after != before {
			t.Fatalf("balance %+v, was %+v", after, before)
		}
		var a models.Account
		if err := s.DB.R.Take(&a, acct.ID).Error; err != nil || a.WaitingTasks != 0 {
			t.Fatalf("backlog after the cancel: %d, %v", a.WaitingTasks, err)
		}
		testkit.CheckLedger(t, s.DB)

		// A cancelled task is a failed one: the next DELETE deletes it, the one after finds nothing.
		if r := s.Do(t, "DELETE", "/v1/videos/"+id, acct.Key, nil); r.Status != 200 {
			t.Fatalf("delete of the cancelled task: %d %s", r.Status, r.Body)
		}
		if r := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil); r.Status != 404 {
			t.Fatalf("the deleted task still shows: %d %s", r.Status, r.Body)
		}
		if r := s.Do(t, "DELETE", "/v1/videos/"+id, acct.Key, nil); r.Status != 404 || r.ErrorCode() != "not_found" {
			t.Fatalf("third DELETE: %d %s", r.Status, r.Body)
		}
		if k := testkit.Kinds(testkit.Entries(t, s.DB, id)); len(k) != 2 {
			t.Fatalf("the delete moved money: %v", k)
		}
	})
}

// TestConcurrentCancels: many DELETEs of one queued task at once release it exactly once; each answers
// 200 (it cancelled it, or deleted it once cancelled) or 404 (it was deleted by then).
func TestConcurrentCancels(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "10")
		before := balance(t, s, acct.ID)
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite"})["id"].(string)
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = s.Do(t, "DELETE", "/v1/videos/"+id, acct.Key, nil).Status
			}()
		}
		wg.Wait()
		for _, st := range statuses {
			if st != 200 && st != 404 {
				t.Fatalf("answers %v", statuses)
			}
		}
		if k := testkit.Kinds(testkit.Entries(t, s.DB, id)); !reflect.DeepEqual(k, []string{"reserve", "release"}) {
			t.Fatalf("ledger after %v: %v", statuses, k)
		}
		if task := testkit.Task(t, s.DB, id); task.Status != "failed" || *task.ErrorCode != "cancelled" {
			t.Fatalf("task %s %v", task.Status, task.ErrorCode)
		}
		if after := balance(t, s, acct.ID); after != before {
			t.Fatalf("balance %+v, was %+v", after, before)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// arkUpstream is Ark's protocol (the simulator speaking it) on a clock the test moves: its tasks are
// queued upstream for the first tenth of their 1000 s, running until the end, then succeeded.
type arkUpstream struct {
	*sim.Sim
	offset atomic.Int64
}

func (a *arkUpstream) advance(d time.Duration) { a.offset.Store(int64(d)) }

func startArk(t *testing.T, dbURL string, max int) (*testkit.Server, *arkUpstream) {
	t.Helper()
	a := &arkUpstream{}
	var err error
	a.Sim, err = sim.New(sim.Config{Dir: t.TempDir(), Duration: 1000 * time.Second, Concurrency: 50, Secrets: []string{"ark-key"}, Protocol: sim.ProtocolArk,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return time.Now().Add(time.Duration(a.offset.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Sim)
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "upstreams.yaml")
	yaml := fmt.Sprintf("upstreams:\n  - id: ark\n    name: Ark\n    kind: ark\n    base_url: %s/api/v3\n    secret: ark-key\n    max_concurrency: %d\n"+
		"    models:\n      videogen-2.0-720p: {upstream_model: dreamina-seedance-2-0-260128, cost_per_second: \"0.18\"}\n", srv.URL, max)
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	// No ffmpeg: Ark serves no stills, and making them is not what these tests are about. Polls at most
	// 2 s apart: the simulator's clock jumps (advance), and a task aged by it is polled as a young one is,
	// so its end is seen within seconds rather than after the 30 s backoff of an old task.
	return testkit.Start(t, dbURL, map[string]string{"UPSTREAMS_FILE": file, "FFMPEG_PATH": "off", "POLL_INTERVAL_MAX": "2s"}), a
}

// acceptedUpstream creates a task and waits until Ark has accepted it.
func acceptedUpstream(t *testing.T, s *testkit.Server, key, prompt string) string {
	t.Helper()
	id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-720p", "prompt": prompt, "seconds": 5})["id"].(string)
	testkit.Eventually(t, 20*time.Second, "Ark accepts "+id, func() bool { return testkit.Task(t, s.DB, id).UpstreamTaskID != nil })
	return id
}

// TestCancelAtArk: a task Ark has accepted and still queues is cancelled there (Ark's DELETE, with the
// credential that created it), then failed here as cancelled and released, the upstream outcome recorded
// for the margin report. One Ark is already running cannot be stopped: 409 video_not_finished saying so,
// and nothing changes — the task goes on and is charged when it completes.
func TestCancelAtArk(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, ark := startArk(t, dbURL, 4)
		acct := s.NewAccount(t, "10")
		queued := acceptedUpstream(t, s, acct.Key, "a kite")
		running := acceptedUpstream(t, s, acct.Key, "a storm")

		r := s.Do(t, "DELETE", "/v1/videos/"+queued, acct.Key, nil)
		if r.Status != 200 || r.JSON(t)["object"] != "video.deleted" {
			t.Fatalf("cancel of a task queued at Ark: %d %s", r.Status, r.Body)
		}
		task := testkit.Task(t, s.DB, queued)
		if task.Status != "failed" || *task.ErrorCode != "cancelled" || task.BillingState != "released" || task.UpstreamCancel == nil || *task.UpstreamCancel != "cancelled" {
			t.Fatalf("cancelled task: %s %v %s %v", task.Status, task.ErrorCode, task.BillingState, task.UpstreamCancel)
		}
		if k := testkit.Kinds(testkit.Entries(t, s.DB, queued)); !reflect.DeepEqual(k, []string{"reserve", "release"}) {
			t.Fatalf("ledger: %v", k)
		}
		if !slices.ContainsFunc(ark.Tasks(), func(st sim.Task) bool { return st.ID == *task.UpstreamTaskID && st.CancelledAt != nil }) {
			t.Fatal("Ark's task was not cancelled")
		}

		// Ark runs the other one now: it cannot be stopped.
		ark.advance(200 * time.Second)
		testkit.Eventually(t, 20*time.Second, "the task runs", func() bool { return testkit.Task(t, s.DB, running).Status == "in_progress" })
		entries := testkit.Entries(t, s.DB, running)
		r = s.Do(t, "DELETE", "/v1/videos/"+running, acct.Key, nil)
		if r.Status != 409 || r.ErrorCode() != "video_not_finished" || !strings.Contains(string(r.Body), "cannot stop it now") || r.Header.Get("x-should-retry") != "false" {
			t.Fatalf("cancel of a running task: %d %s", r.Status, r.Body)
		}
		task = testkit.Task(t, s.DB, running)
		if task.Status != "in_progress" || task.BillingState != "reserved" || task.UpstreamCancel != nil || task.LeaseOwner != nil && strings.HasPrefix(*task.LeaseOwner, "cancel-") {
			t.Fatalf("a refused cancel changed the task: %+v", task)
		}
		if got := testkit.Entries(t, s.DB, running); !reflect.DeepEqual(got, entries) {
			t.Fatalf("a refused cancel moved money: %v", testkit.Kinds(got))
		}
		// It goes on, and is charged when it completes.
		ark.advance(1100 * time.Second)
		s.WaitStatus(t, acct.Key, running, 30*time.Second, "completed")
		if k := testkit.Kinds(testkit.Entries(t, s.DB, running)); !reflect.DeepEqual(k, []string{"reserve", "settle"}) {
			t.Fatalf("ledger of the task that went on: %v", k)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestCancelRacesCompletion: cancels of tasks queued at Ark while Ark finishes them and the worker
// collects them. Each task ends exactly one way: cancelled and released, or completed and charged —
// never both, never neither — whatever each DELETE answered.
func TestCancelRacesCompletion(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const n = 6
		s, ark := startArk(t, dbURL, n)
		acct := s.NewAccount(t, "50")
		var ids []string
		for i := range n {
			ids = append(ids, acceptedUpstream(t, s, acct.Key, fmt.Sprintf("take %d", i)))
		}
		var wg sync.WaitGroup
		answers := make([]int, n)
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = s.Do(t, "DELETE", "/v1/videos/"+id, acct.Key, nil).Status
			}()
			if i == n/2 {
				ark.advance(1100 * time.Second) // Ark finishes every task it still has
			}
		}
		wg.Wait()
		for i, id := range ids {
			testkit.Eventually(t, 30*time.Second, id+" ends", func() bool {
				st := testkit.Task(t, s.DB, id).Status
				return st == "completed" || st == "failed"
			})
			task := testkit.Task(t, s.DB, id)
			kinds := testkit.Kinds(testkit.Entries(t, s.DB, id))
			switch {
			case task.Status == "failed" && reflect.DeepEqual(kinds, []string{"reserve", "release"}) && *task.ErrorCode == "cancelled" && answers[i] == 200:
			case task.Status == "completed" && reflect.DeepEqual(kinds, []string{"reserve", "settle"}) && (answers[i] == 409 || answers[i] == 200 && task.DeletedAt != nil):
			default:
				t.Fatalf("%s: answered %d, ended %s (%v) with %v", id, answers[i], task.Status, task.ErrorCode, kinds)
			}
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestCancelRacesSubmission: DELETEs sent the moment tasks are created, while workers assign them
// credentials and submit them to Ark. Whatever each answered, no task is refunded while Ark goes on
// generating it: every task Ark still has (not cancelled there) is one still reserved here, and every
// cancelled task was either never sent or stopped at Ark.
func TestCancelRacesSubmission(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const n = 8
		s, ark := startArk(t, dbURL, n)
		acct := s.NewAccount(t, "50")
		var wg sync.WaitGroup
		ids, answers := make([]string, n), make([]int, n)
		for i := range n {
			ids[i] = s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": fmt.Sprintf("take %d", i), "seconds": 5})["id"].(string)
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = s.Do(t, "DELETE", "/v1/videos/"+ids[i], acct.Key, nil).Status
			}()
		}
		wg.Wait()
		ours := map[string]models.Task{} // by Ark's id
		for i, id := range ids {
			if answers[i] != 200 && answers[i] != 409 {
				t.Fatalf("%s: answered %d", id, answers[i])
			}
			// A refused cancel leaves a task that goes on to Ark.
			testkit.Eventually(t, 20*time.Second, id+" cancelled or at Ark", func() bool {
				task := testkit.Task(t, s.DB, id)
				return task.Status == "failed" || task.UpstreamTaskID != nil
			})
			task := testkit.Task(t, s.DB, id)
			kinds := testkit.Kinds(testkit.Entries(t, s.DB, id))
			switch {
			case answers[i] == 200 && task.Status == "failed" && *task.ErrorCode == "cancelled" && reflect.DeepEqual(kinds, []string{"reserve", "release"}):
			case answers[i] == 409 && task.Status == "queued" && reflect.DeepEqual(kinds, []string{"reserve"}):
			default:
				t.Fatalf("%s: answered %d, now %s with %v", id, answers[i], task.Status, kinds)
			}
			if task.UpstreamTaskID != nil {
				ours[*task.UpstreamTaskID] = task
			}
		}
		t.Logf("answers %v; %d of %d tasks reached Ark", answers, len(ours), n)
		for _, st := range ark.Tasks() {
			task, known := ours[st.ID]
			switch {
			case !known:
				t.Fatalf("Ark has task %s that no task here names", st.ID)
			case st.CancelledAt == nil && task.BillingState != "reserved":
				t.Fatalf("Ark goes on generating %s for %s, which was %s here", st.ID, task.ID, task.BillingState)
			case st.CancelledAt != nil && task.BillingState != "released":
				t.Fatalf("Ark cancelled %s, but %s is %s here", st.ID, task.ID, task.BillingState)
			}
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestConsoleCancelOnlyWhileItCan: the task page offers Cancel only while a cancel can succeed — at Ark,
// while the task queues there, for the live page to hide once Ark runs it (data-cancel-while) — and a
// stale page's cancel of a running task answers on the task's page in the console's words, not the
// API's.
func TestConsoleCancelOnlyWhileItCan(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, ark := startArk(t, dbURL, 4)
		b := signUpVerified(t, s, "watcher@example.com")
		if err := creditUSD(s, accountOf(t, s, "watcher@example.com").AccountID, "10"); err != nil {
			t.Fatal(err)
		}
		key := createKey(t, b, "api")
		id := acceptedUpstream(t, s, key, "a lighthouse")
		page := "/console/tasks/" + id
		b.get(page).contains(t, "Cancel video", `data-cancel-while="queued"`)

		ark.advance(200 * time.Second)
		testkit.Eventually(t, 20*time.Second, "Ark runs the task", func() bool { return testkit.Task(t, s.DB, id).Status == "in_progress" })
		b.get(page).lacks(t, "Cancel video")

		stale := b.postRaw(page+"/cancel", url.Values{"_csrf": {csrfOf(t, b, "/console/account")}})
		if stale.Status != 303 || stale.location() != page+"?cancel=started" {
			t.Fatalf("the cancel of a running task: %d %s", stale.Status, stale.location())
		}
		p := b.get(stale.location())
		p.contains(t, "Not cancelled: Its provider has started generating it and cannot stop it now.")
		p.lacks(t, "GET /v1/videos")
		if task := testkit.Task(t, s.DB, id); task.Status != "in_progress" || task.BillingState != "reserved" {
			t.Fatalf("the refused cancel changed the task: %s %s", task.Status, task.BillingState)
		}
	})
}

func balance(t *testing.T, s *testkit.Server, id int64) [2]int64 {
	t.Helper()
	var a models.Account
	if err := s.DB.R.Take(&a, id).Error; err != nil {
		t.Fatal(err)
	}
	return [2]int64{a.AvailableMicros, a.ReservedMicros}
}

// TestConsoleCancel: the task page's Cancel button (a form with its CSRF token, no JavaScript needed)
// cancels a queued task and the page then says what was released; it is gone once the task has
// finished, a repeated post says there was nothing to cancel, and another account cannot cancel the
// task (404, nothing changes).
func TestConsoleCancel(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		b := signUpVerified(t, s, "canceller@example.com")
		acct := accountOf(t, s, "canceller@example.com").AccountID
		if err := creditUSD(s, acct, "10"); err != nil {
			t.Fatal(err)
		}
		key := createKey(t, b, "api")
		id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite", "seconds": 4})["id"].(string)
		mine := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "another kite", "seconds": 4})["id"].(string)
		page := "/console/tasks/" + id
		b.get(page).contains(t, "Cancel video", "the $0.20 reserved for it is released to your balance", `action="/console/tasks/`+id+`/cancel"`)

		// Another account's post, with its own valid CSRF token: like an unknown task.
		other := signUpVerified(t, s, "other@example.com")
		if p := other.post("/console/tasks", "/console/tasks/"+mine+"/cancel", url.Values{}); p.Status != 404 {
			t.Fatalf("another account's cancel: %d", p.Status)
		}
		if task := testkit.Task(t, s.DB, mine); task.Status != "queued" || task.BillingState != "reserved" {
			t.Fatalf("another account's cancel changed the task: %s %s", task.Status, task.BillingState)
		}

		p := b.post(page, page+"/cancel", url.Values{})
		if p.Status != 303 || p.location() != page+"?notice=cancelled" {
			t.Fatalf("cancel: %d %s", p.Status, p.location())
		}
		done := b.get(p.location())
		done.contains(t, "Cancelled: the $0.20 reserved for this video was released to your balance", "Cancelled at your request (console user canceller@example.com)")
		done.lacks(t, "Cancel video")
		task := testkit.Task(t, s.DB, id)
		if task.Status != "failed" || *task.ErrorCode != "cancelled" || task.BillingState != "released" {
			t.Fatalf("cancelled task: %s %v %s", task.Status, task.ErrorCode, task.BillingState)
		}
		if k := testkit.Kinds(testkit.Entries(t, s.DB, id)); !reflect.DeepEqual(k, []string{"reserve", "release"}) {
			t.Fatalf("ledger: %v", k)
		}
		// A second post (a stale page): nothing to cancel, said on the task's page, and the console never
		// deletes.
		again := b.postRaw(page+"/cancel", url.Values{"_csrf": {csrfOf(t, b, "/console/account")}})
		if again.Status != 303 || again.location() != page+"?cancel=finished" || testkit.Task(t, s.DB, id).DeletedAt != nil {
			t.Fatalf("second cancel: %d %s", again.Status, again.location())
		}
		b.get(again.location()).contains(t, "Not cancelled: This video had already finished, so there was nothing to cancel.")

		// Cancelled is a state of its own wherever a person reads it; the API keeps OpenAI's failed.
		later := b.get(page)
		later.contains(t, `<span class="badge cancelled" data-task-field="status">cancelled</span>`, "Cancelled: Cancelled at your request",
			"Refunded (video cancelled)")
		later.lacks(t, "badge failed", "Failed:", "Refunded (video failed)")
		if st := b.get(page + "/status"); !strings.Contains(st.Body, `"status":"cancelled"`) {
			t.Errorf("the live status of a cancelled video: %s", st.Body)
		}
		list := b.get("/console/tasks")
		list.contains(t, `<option value="cancelled">Cancelled</option>`)
		if !regexp.MustCompile(`(?s)data-task-id="` + id + `".*?badge cancelled`).MatchString(list.Body) {
			t.Errorf("the Tasks list does not show %s as cancelled", id)
		}
		b.get("/console/tasks?status=cancelled").contains(t, id)
		b.get("/console/tasks?status=cancelled").lacks(t, mine)
		b.get("/console/tasks?status=failed").lacks(t, id, mine)
		b.get("/console/wallet").contains(t, "Refunded (video cancelled)")
		usagePage := b.get("/console/usage")
		usagePage.contains(t, "1 cancelled")
		if rows := pageUsage(t, usagePage.Body); rows[len(rows)-1].Cancelled != 1 || rows[len(rows)-1].Failed != 0 {
			t.Errorf("usage total: %+v, want one cancelled video and none failed", rows[len(rows)-1])
		}
		if _, rows := csvUsage(t, b.get("/console/usage.csv")); len(rows) == 0 || rows[len(rows)-1].Cancelled != 1 {
			t.Errorf("usage CSV: %+v, want its day with one cancelled video", rows)
		}
		api := testkit.Do(t, s.URL, "GET", "/v1/videos/"+id, key, nil)
		if !strings.Contains(string(api.Body), `"status":"failed"`) || !strings.Contains(string(api.Body), `"code":"cancelled"`) {
			t.Errorf("the API's view of a cancelled video: %s", api.Body)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
