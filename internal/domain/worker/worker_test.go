package worker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/domain/worker"
	"videogen/internal/testkit"
	"videogen/models"
)

func events(t *testing.T, s *testkit.Server, id string) []models.TaskEvent {
	t.Helper()
	var es []models.TaskEvent
	s.DB.R.Where("task_id = ?", id).Order("id").Find(&es)
	return es
}

func transitions(es []models.TaskEvent) string {
	var out []string
	for _, e := range es {
		if e.FromStatus != e.ToStatus {
			out = append(out, e.FromStatus+">"+e.ToStatus)
		}
	}
	return strings.Join(out, " ")
}

func simTask(t *testing.T, s *testkit.Server, prompt string) sim.Task {
	t.Helper()
	var found []sim.Task
	for _, st := range s.Sim.Tasks() {
		if st.Prompt == prompt {
			found = append(found, st)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d simulator tasks with prompt %q, want exactly 1", len(found), prompt)
	}
	return found[0]
}

func TestTaskOutcomes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// Long enough that a poll sees the task running even on a loaded machine (the log must show in_progress).
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "1s"})
		acct := s.NewAccount(t, "100")
		create := func(prompt string, extra ...any) string {
			body := map[string]any{"model": "videogen-2.0-480p", "prompt": prompt}
			for i := 0; i+1 < len(extra); i += 2 {
				body[extra[i].(string)] = extra[i+1]
			}
			return s.CreateVideo(t, acct.Key, body)["id"].(string)
		}
		ok := create("a calm lake", "generate_audio", true)
		fail := create("a storm [sim:fail]")
		reject := create("forbidden [sim:reject]")
		flaky := create("a bridge [sim:5xx-once]")

		// A normal task: queued → in progress → completed, settled, on one credential, with its audio flag sent upstream.
		v := s.WaitStatus(t, acct.Key, ok, 20*time.Second, "completed", "failed")
		if v["status"] != "completed" || v["billing"].(map[string]any)["state"] != "settled" {
			t.Fatalf("ok task %v", v)
		}
		task := testkit.Task(t, s.DB, ok)
		if task.CredentialID == nil || task.UpstreamTaskID == nil || task.SubmitAttempts != 1 {
			t.Fatalf("ok task row %+v", task)
		}
		if got := transitions(events(t, s, ok)); got != ">queued queued>in_progress in_progress>completed" {
			t.Fatalf("task log %q", got)
		}
		if st := simTask(t, s, "a calm lake"); !st.GenerateAudio || st.ID != *task.UpstreamTaskID || st.Submissions != 1 {
			t.Fatalf("simulator saw %+v", st)
		}
		if got := testkit.Kinds(testkit.Entries(t, s.DB, ok)); fmt.Sprint(got) != "[reserve settle]" {
			t.Fatalf("ok entries %v", got)
		}

		// [sim:fail]: fails upstream → failed, released.
		v = s.WaitStatus(t, acct.Key, fail, 20*time.Second, "completed", "failed")
		if v["status"] != "failed" || v["error"].(map[string]any)["code"] != "generation_failed" || v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("fail task %v", v)
		}
		if got := testkit.Kinds(testkit.Entries(t, s.DB, fail)); fmt.Sprint(got) != "[reserve release]" {
			t.Fatalf("fail entries %v", got)
		}

		// [sim:reject]: refused at submission → failed, released, never polled.
		v = s.WaitStatus(t, acct.Key, reject, 20*time.Second, "completed", "failed")
		if v["status"] != "failed" || v["error"].(map[string]any)["code"] != "upstream_rejected" || v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("reject task %v", v)
		}
		if got := transitions(events(t, s, reject)); got != ">queued queued>failed" {
			t.Fatalf("reject task log %q", got)
		}

		// [sim:5xx-once]: accepted, answered 503 → retried on the same credential with the same key, one
		// upstream task, completed and settled.
		v = s.WaitStatus(t, acct.Key, flaky, 20*time.Second, "completed", "failed")
		if v["status"] != "completed" || v["billing"].(map[string]any)["state"] != "settled" {
			t.Fatalf("5xx-once task %v", v)
		}
		ft := testkit.Task(t, s.DB, flaky)
		st := simTask(t, s, "a bridge [sim:5xx-once]")
		if ft.SubmitAttempts != 2 || st.Submissions != 2 || st.ID != *ft.UpstreamTaskID || st.IdemKey != *ft.UpstreamKey || !st.Answered5xx {
			t.Fatalf("5xx-once: platform %+v, simulator %+v", ft, st)
		}
		var attempts []string
		for _, e := range events(t, s, flaky) {
			if strings.HasPrefix(e.Detail, "submission attempt") {
				attempts = append(attempts, e.Detail)
			}
		}
		if len(attempts) != 3 || !strings.Contains(attempts[2], *ft.CredentialID) || !strings.Contains(attempts[2], *ft.UpstreamKey) {
			t.Fatalf("attempts recorded: %q", attempts)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func TestDeadlines(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// One credential running one task at a time: the slow task holds it, the next one waits in the queue.
		s := testkit.Start(t, dbURL, map[string]string{
			"SIM_DURATION": "150ms", "SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1",
			"RUN_TIMEOUT": "600ms", "QUEUE_TIMEOUT": "400ms",
		})
		acct := s.NewAccount(t, "100")
		slow := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "takes ages [sim:slow]"})["id"].(string)
		testkit.Eventually(t, 10*time.Second, "the slow task submitted", func() bool { return testkit.Task(t, s.DB, slow).CredentialID != nil })
		waiting := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "waits for a slot"})["id"].(string)

		v := s.WaitStatus(t, acct.Key, waiting, 10*time.Second, "failed", "completed")
		if v["status"] != "failed" || v["error"].(map[string]any)["code"] != "queue_timeout" || v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("waiting task %v", v)
		}
		if testkit.Task(t, s.DB, waiting).CredentialID != nil {
			t.Fatal("task past its queue deadline was submitted")
		}
		v = s.WaitStatus(t, acct.Key, slow, 10*time.Second, "failed", "completed")
		if v["status"] != "failed" || v["error"].(map[string]any)["code"] != "run_timeout" || v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("slow task %v", v)
		}

		// The upstream finishes the slow task later (1.5 s): the completion is logged and ignored. Until
		// then a recheck of the failed task only reads the upstream's state.
		var state string
		testkit.Eventually(t, 10*time.Second, "the upstream completes the slow task", func() bool {
			var err error
			if state, err = s.Worker.Recheck(context.Background(), slow); err != nil {
				t.Fatalf("recheck: %v", err)
			}
			return state == "completed"
		}, func() string { return "upstream state " + state })
		after := testkit.Task(t, s.DB, slow)
		es := events(t, s, slow)
		if after.Status != "failed" || after.BillingState != "released" || !strings.Contains(es[len(es)-1].Detail, "ignored") {
			t.Fatalf("after late completion: %s/%s, last event %q", after.Status, after.BillingState, es[len(es)-1].Detail)
		}
		if got := testkit.Kinds(testkit.Entries(t, s.DB, slow)); fmt.Sprint(got) != "[reserve release]" {
			t.Fatalf("entries %v", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func TestCapacityAndBacklog(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{
			"SIM_DURATION": "800ms", "SIM_CREDENTIALS": "2", "SIM_CONCURRENCY": "1", "MAX_QUEUED_PER_ACCOUNT": "2",
		})
		acct := s.NewAccount(t, "100")
		body := func(i int) map[string]any {
			return map[string]any{"model": "videogen-2.0-480p", "prompt": fmt.Sprintf("task %d", i)}
		}
		a := s.CreateVideo(t, acct.Key, body(1))["id"].(string)
		b := s.CreateVideo(t, acct.Key, body(2))["id"].(string)
		testkit.Eventually(t, 10*time.Second, "the first two tasks submitted", func() bool {
			return testkit.Task(t, s.DB, a).CredentialID != nil && testkit.Task(t, s.DB, b).CredentialID != nil
		})
		if *testkit.Task(t, s.DB, a).CredentialID == *testkit.Task(t, s.DB, b).CredentialID {
			t.Fatal("both tasks on one credential: the least-loaded credential was not chosen")
		}
		// Every credential is full: the next tasks wait queued, without a credential.
		c := s.CreateVideo(t, acct.Key, body(3))["id"].(string)
		d := s.CreateVideo(t, acct.Key, body(4))["id"].(string)
		time.Sleep(100 * time.Millisecond) // a worker pass or two (an idle one wakes every 100 ms): they must still wait
		for _, id := range []string{c, d} {
			if tk := testkit.Task(t, s.DB, id); tk.Status != "queued" || tk.CredentialID != nil {
				t.Fatalf("task %s while credentials are full: %s on %v", id, tk.Status, tk.CredentialID)
			}
		}
		// Past the backlog: 429 no_capacity with Retry-After, nothing written.
		r := s.Do(t, "POST", "/v1/videos", acct.Key, body(5))
		if r.Status != 429 || r.ErrorCode() != "no_capacity" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("over the backlog: %d %s (Retry-After %q)", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		var n int64
		s.DB.R.Model(&models.Task{}).Where("account_id = ?", acct.ID).Count(&n)
		if n != 4 {
			t.Fatalf("%d tasks written", n)
		}
		for _, id := range []string{a, b, c, d} {
			if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("task %s %v", id, v)
			}
		}
		if s.Sim.Refused() != 0 {
			t.Fatalf("the simulator refused %d submissions: slots were miscounted", s.Sim.Refused())
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestInstancesShareOneDatabase runs two instances with workers on one database and one upstream: every
// task is submitted exactly once, no credential is overfilled, and billing stays exact.
func TestInstancesShareOneDatabase(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		secrets := []string{"upstream-key-one", "upstream-key-two"}
		up, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: 200 * time.Millisecond, Concurrency: 3, Secrets: secrets, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(up)
		defer hs.Close()
		env := map[string]string{"UPSTREAM_BASE_URL": hs.URL, "UPSTREAM_API_KEYS": strings.Join(secrets, ","), "UPSTREAM_CONCURRENCY": "3", "MAX_QUEUED_PER_ACCOUNT": "100"}
		one := testkit.Start(t, dbURL, env)
		two := testkit.Start(t, dbURL, env)
		acct := one.NewAccount(t, "100")
		const n = 24
		var ids []string
		for i := 0; i < n; i++ {
			srv := one
			if i%2 == 1 {
				srv = two
			}
			ids = append(ids, srv.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("shared %d", i)})["id"].(string))
		}
		for _, id := range ids {
			if v := one.WaitStatus(t, acct.Key, id, 60*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("task %s: %v", id, v)
			}
		}
		tasks := up.Tasks()
		if len(tasks) != n {
			t.Fatalf("upstream has %d tasks for %d created", len(tasks), n)
		}
		for _, st := range tasks {
			if st.Submissions != 1 {
				t.Fatalf("upstream task %s was submitted %d times", st.ID, st.Submissions)
			}
		}
		if up.Refused() != 0 {
			t.Fatalf("upstream refused %d submissions for capacity", up.Refused())
		}
		byWorker := map[string]int{}
		var first []models.TaskEvent
		one.DB.R.Where("detail LIKE ?", "submission attempt 1 %").Find(&first)
		for _, e := range first {
			for _, w := range []string{one.Cfg.WorkerID, two.Cfg.WorkerID} {
				if strings.Contains(e.Detail, "(worker "+w+")") {
					byWorker[w]++
				}
			}
		}
		t.Logf("submissions per instance: %v", byWorker)
		testkit.CheckLedger(t, one.DB)
	})
}

// slowContent streams simulator downloads slowly and counts them per task.
type slowContent struct {
	next  http.Handler
	mu    sync.Mutex
	count map[string]int
}

func (s *slowContent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Videos only: the stills the worker fetches after each video (?variant=) pass as they are.
	if strings.HasSuffix(r.URL.Path, "/content") && r.URL.Query().Get("variant") == "" {
		s.mu.Lock()
		s.count[r.URL.Path]++
		s.mu.Unlock()
		rec := httptest.NewRecorder()
		s.next.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		body := rec.Body.Bytes()
		for i := 0; i < 15; i++ { // ~5 s in fifteen slices, past two of the test's 2 s leases
			lo, hi := i*len(body)/15, (i+1)*len(body)/15
			_, _ = w.Write(body[lo:hi])
			w.(http.Flusher).Flush()
			time.Sleep(330 * time.Millisecond)
		}
		return
	}
	s.next.ServeHTTP(w, r)
}

// TestLeaseRenewedDuringSlowWork: a download longer than the lease is not taken over by another
// instance — each output is copied once, and no completion is discarded as late.
func TestLeaseRenewedDuringSlowWork(t *testing.T) {
	secrets := []string{"slow-key"}
	up, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: 100 * time.Millisecond, Concurrency: 4, Secrets: secrets, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	slow := &slowContent{next: up, count: map[string]int{}}
	hs := httptest.NewServer(slow)
	defer hs.Close()
	dbURL := testkit.SQLiteURL(t)
	env := map[string]string{"UPSTREAM_BASE_URL": hs.URL, "UPSTREAM_API_KEYS": secrets[0], "LEASE_DURATION": "2s", "POLL_INTERVAL_MIN": "20ms"}
	// A 2 s lease, renewed every 0.67 s: a renewal on a busy machine (two instances' queues polling one
	// SQLite file) may wait over a second for the write lock and still be in time.
	one := testkit.Start(t, dbURL, env)
	two := testkit.Start(t, dbURL, env)
	acct := one.NewAccount(t, "10")
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, one.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("slow copy %d", i)})["id"].(string))
	}
	for _, id := range ids {
		if v := two.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
			t.Fatalf("%s: %v", id, v)
		}
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	for path, n := range slow.count {
		if n != 1 {
			t.Errorf("%s downloaded %d times", path, n)
		}
	}
	var ignored int64
	one.DB.R.Model(&models.TaskEvent{}).Where("detail LIKE ?", "%ignored%").Count(&ignored)
	if ignored != 0 {
		t.Errorf("%d completions were discarded: a second instance took over live work", ignored)
	}
	testkit.CheckLedger(t, one.DB)
}

// TestFailWhileSlotAssignedElsewhere: the sweep fails a task from a stale read while another instance is
// assigning it a credential; the slot that instance took is freed with it, and the backlog counter stays
// exact (Fail re-reads the row under a lock).
func TestFailWhileSlotAssignedElsewhere(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "100")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "one"})["id"].(string)
		var cred models.UpstreamCredential
		s.DB.R.Where("enabled = ?", true).Order("id").Take(&cred)
		stale := testkit.Task(t, s.DB, id) // what the sweep read: no credential yet

		driver, dsn := "sqlite", "file:"+dbURL+"?_txlock=immediate&_pragma=busy_timeout(10000)"
		if s.DB.Postgres {
			driver, dsn = "pgx", dbURL
		}
		raw, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		ctx := context.Background()
		tx, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// What acquireSlot does on another instance, not yet committed.
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{"UPDATE upstream_credentials SET in_flight = in_flight + 1 WHERE id = $1", []any{cred.ID}},
			{"UPDATE tasks SET credential_id = $1, upstream_key = 'k' WHERE id = $2 AND status = 'queued' AND credential_id IS NULL", []any{cred.ID, id}},
			{"UPDATE accounts SET waiting_tasks = waiting_tasks - 1 WHERE id = $1", []any{acct.ID}},
		} {
			if _, err := tx.Exec(q.sql, q.args...); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- s.Tasks.Fail(ctx, &stale, "queue_timeout", "late") }()
		if s.DB.Postgres {
			// Commit once Fail waits for the row this transaction holds.
			var holder int
			if err := tx.QueryRow("SELECT pg_backend_pid()").Scan(&holder); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, 10*time.Second, "Fail waits for the other instance's lock", func() bool {
				var waiting int
				if err := raw.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", holder).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
				return waiting > 0
			})
		} else {
			// SQLite shows no one waiting for its write lock (Fail's BEGIN IMMEDIATE retries inside the
			// driver): give it the time to get there.
			time.Sleep(300 * time.Millisecond)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if after := testkit.Task(t, s.DB, id); after.Status != "failed" || after.BillingState != "released" {
			t.Fatalf("task %s/%s", after.Status, after.BillingState)
		}
		testkit.CheckLedger(t, s.DB) // in_flight back to 0, waiting_tasks 0
	})
}

// TestClaimsAreDisjoint: instances claiming at the same moment never get the same task.
func TestClaimsAreDisjoint(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"WORKERS": "false", "MAX_QUEUED_PER_ACCOUNT": "1000"}
		one, two := testkit.Start(t, dbURL, env), testkit.Start(t, dbURL, env)
		acct := one.NewAccount(t, "1000")
		for i := 0; i < 80; i++ {
			one.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("c%d", i)})
		}
		var cred models.UpstreamCredential
		one.DB.R.Order("id").Take(&cred)
		// Make every task look in flight and due — behind the counters' back (the credential's in_flight,
		// the account's waiting_tasks), so the tasks are put back in the queue before the rig's audit.
		one.DB.W.Exec("UPDATE tasks SET credential_id = ?, upstream_task_id = 'u', next_check_at = ?", cred.ID, time.Now().UTC().Add(-time.Minute))
		t.Cleanup(func() {
			if err := one.DB.W.Exec("UPDATE tasks SET credential_id = NULL, upstream_task_id = NULL, lease_owner = NULL, lease_until = NULL").Error; err != nil {
				t.Errorf("put the tasks back in the queue: %v", err)
			}
		})
		ctx := context.Background()
		for round := 0; round < 10; round++ {
			one.DB.W.Exec("UPDATE tasks SET lease_owner = NULL, lease_until = NULL")
			var a, b []worker.Claimed
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, c := range []struct {
				w   *worker.Worker
				out *[]worker.Claimed
			}{{one.Worker, &a}, {two.Worker, &b}} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got, err := c.w.Claim(ctx, 60)
					if err != nil {
						t.Error(err)
					}
					*c.out = got
				}()
			}
			close(start)
			wg.Wait()
			seen := map[string]bool{}
			for _, x := range a {
				seen[x.ID] = true
			}
			for _, x := range b {
				if seen[x.ID] {
					t.Fatalf("round %d: task %s claimed by both instances (%d and %d claimed)", round, x.ID, len(a), len(b))
				}
			}
			if n := len(a) + len(b); n < 60 || n > 80 {
				t.Fatalf("round %d: %d + %d claims of 80 due tasks", round, len(a), len(b))
			}
		}
	})
}

// TestStalledDownloadDoesNotBlockOthers: an upstream that stalls one download does not delay the
// submission of other tasks on the same instance.
func TestStalledDownloadDoesNotBlockOthers(t *testing.T) {
	var n atomic.Int64
	var stuck atomic.Bool
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST":
			_ = json.NewEncoder(w).Encode(map[string]any{"id": fmt.Sprintf("up%d", n.Add(1)), "status": "queued"})
		case strings.HasSuffix(r.URL.Path, "/content"):
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			_, _ = w.Write(make([]byte, 10))
			w.(http.Flusher).Flush()
			stuck.Store(true)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"id": strings.TrimPrefix(r.URL.Path, "/v1/videos/"), "status": "completed", "progress": 100})
		}
	}))
	defer up.Close()
	defer close(release)
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"UPSTREAM_BASE_URL": up.URL, "UPSTREAM_API_KEYS": "k1", "UPSTREAM_CONCURRENCY": "10"})
	acct := s.NewAccount(t, "100")
	s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "stalls"})
	testkit.Eventually(t, 10*time.Second, "the first task's download stuck", func() bool { return stuck.Load() })
	second := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "must not wait"})["id"].(string)
	testkit.Eventually(t, 3*time.Second, "the second task submitted while a download is stalled", func() bool {
		return testkit.Task(t, s.DB, second).UpstreamTaskID != nil
	})
}

// truncatingContent cuts the first download of each video off half-way, as a broken connection would.
type truncatingContent struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string]int
}

func (tc *truncatingContent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/content") || r.URL.Query().Get("variant") != "" { // videos only, not their stills
		tc.next.ServeHTTP(w, r)
		return
	}
	tc.mu.Lock()
	tc.seen[r.URL.Path]++
	first := tc.seen[r.URL.Path] == 1
	tc.mu.Unlock()
	if !first {
		tc.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tc.next.ServeHTTP(rec, r)
	w.Header().Set("Content-Length", fmt.Sprint(rec.Body.Len()))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes()[:rec.Body.Len()/2])
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // drop the connection with half the promised bytes sent
}

// TestSettlesOnlyAfterWholeCopy: a copy cut off half-way is thrown away and retried; the task completes
// with the whole file, settled once.
func TestSettlesOnlyAfterWholeCopy(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		up, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: 100 * time.Millisecond, Concurrency: 4, Secrets: []string{"k"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		tc := &truncatingContent{next: up, seen: map[string]int{}}
		hs := httptest.NewServer(tc)
		defer hs.Close()
		s := testkit.Start(t, dbURL, map[string]string{"UPSTREAM_BASE_URL": hs.URL, "UPSTREAM_API_KEYS": "k"})
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "cut short"})["id"].(string)
		if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed", "failed"); v["status"] != "completed" {
			t.Fatalf("%v", v)
		}
		task := testkit.Task(t, s.DB, id)
		body := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil).Body
		tc.mu.Lock()
		downloads := tc.seen["/v1/videos/"+*task.UpstreamTaskID+"/content"]
		tc.mu.Unlock()
		if downloads != 2 || int64(len(body)) != *task.OutputBytes || len(body) < 1000 {
			t.Fatalf("%d downloads, stored %d bytes, served %d", downloads, *task.OutputBytes, len(body))
		}
		if got := testkit.Kinds(testkit.Entries(t, s.DB, id)); fmt.Sprint(got) != "[reserve settle]" {
			t.Fatalf("entries %v", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestOldIdempotencyKeysAreDeleted: keys past their 24-hour window are removed by the janitor's sweep.
func TestOldIdempotencyKeysAreDeleted(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"MEDIA_SWEEP_INTERVAL": "100ms"})
	acct := s.NewAccount(t, "10")
	s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "old"}, "Idempotency-Key", "old-key")
	s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "new"}, "Idempotency-Key", "new-key")
	s.DB.W.Exec("UPDATE idempotency_keys SET created_at = ? WHERE key = 'old-key'", time.Now().UTC().Add(-25*time.Hour))
	var keys []models.IdempotencyKey
	testkit.Eventually(t, 10*time.Second, "the sweep deletes the old key only", func() bool {
		keys = nil
		s.DB.R.Find(&keys)
		return len(keys) == 1 && keys[0].Key == "new-key"
	}, func() string { return fmt.Sprintf("keys: %+v", keys) })
}

// pollTimes records when the worker created each upstream task and when it polled it.
type pollTimes struct {
	next    http.Handler
	mu      sync.Mutex
	created time.Time
	polls   []time.Time
}

func (p *pollTimes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/videos":
		p.created = time.Now()
	case r.Method == http.MethodGet && strings.Count(r.URL.Path, "/") == 3: // /v1/videos/{id}, not its content
		p.polls = append(p.polls, time.Now())
	}
	p.mu.Unlock()
	p.next.ServeHTTP(w, r)
}

// TestIdleWorkerWakesWhenATaskIsDue: a worker with nothing to claim sleeps until the next check it finds
// in the database, not for its whole idle wait (2 s here, with 1 s polls): the first poll comes at the
// poll interval after the submission.
func TestIdleWorkerWakesWhenATaskIsDue(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		secrets := []string{"idle-key"}
		up, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: 100 * time.Millisecond, Concurrency: 2, Secrets: secrets, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		times := &pollTimes{next: up}
		hs := httptest.NewServer(times)
		defer hs.Close()
		s := testkit.Start(t, dbURL, map[string]string{"UPSTREAM_BASE_URL": hs.URL, "UPSTREAM_API_KEYS": secrets[0],
			"POLL_INTERVAL_MIN": "1s", "POLL_INTERVAL_MAX": "1s"})
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "due"})["id"].(string)
		s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		times.mu.Lock()
		defer times.mu.Unlock()
		if len(times.polls) == 0 {
			t.Fatal("the task completed without a poll")
		}
		if d := times.polls[0].Sub(times.created); d < 950*time.Millisecond || d >= 1900*time.Millisecond {
			t.Fatalf("first poll %s after the submission, want the 1 s poll interval (well before the 2 s idle wait)", d)
		}
	})
}
