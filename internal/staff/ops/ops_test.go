package ops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/staff/ops"
	"videogen/internal/testkit"
	"videogen/models"
)

func openDB(t *testing.T, url string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDaily: tasks and charges fall on their UTC day — a moment before midnight UTC on the day before,
// midnight on the next, a time written in another zone on its UTC day — and the charges are the exact
// micro-dollar sums of the settle entries, nothing else of the ledger counted.
func TestDaily(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		acct := testkit.NewAccount(t, d, "100")
		now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
		midnight := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		paris, _ := time.LoadLocation("Europe/Paris")
		n := 0
		task := func(created time.Time, status string) {
			n++
			id := fmt.Sprintf("video_daily%04d", n)
			billing := map[string]string{"completed": "settled", "failed": "released", "queued": "reserved"}[status]
			if err := d.W.Create(&models.Task{ID: id, AccountID: acct.ID, Model: "m", Prompt: "p", Seconds: 4, Size: "1x1", AspectRatio: "1:1",
				Inputs: "{}", Status: status, PriceMicros: 1, AmountMicros: 4, BillingState: billing, NextCheckAt: created, QueueDeadline: created,
				CreatedAt: created, UpdatedAt: created}).Error; err != nil {
				t.Fatal(err)
			}
		}
		entry := func(kind string, micros int64, at time.Time) {
			n++
			id := fmt.Sprintf("video_entry%04d", n)
			if err := d.W.Create(&models.LedgerEntry{AccountID: acct.ID, Kind: kind, DeltaReserved: -micros, TaskID: &id, CreatedAt: at}).Error; err != nil {
				t.Fatal(err)
			}
		}
		task(midnight.Add(-time.Microsecond), "completed") // yesterday, UTC
		task(midnight, "failed")                           // today
		task(midnight.Add(time.Hour).In(paris), "completed")
		task(midnight.Add(2*time.Hour), "queued")
		task(midnight.AddDate(0, 0, -29), "completed") // the chart's first day
		task(midnight.AddDate(0, 0, -30), "completed") // before it
		entry("settle", 1_234_567, midnight.Add(-time.Microsecond))
		entry("settle", 1, midnight)
		entry("settle", 2_000_003, midnight.Add(30*time.Minute).In(paris))
		entry("release", 999_999, midnight.Add(time.Hour)) // a refund of a failed task is no charge
		entry("settle", 7, midnight.AddDate(0, 0, -30))

		days, err := ops.Daily(context.Background(), d, now, ops.DailyDays)
		if err != nil {
			t.Fatal(err)
		}
		if len(days) != 30 || !days[0].Day.Equal(midnight.AddDate(0, 0, -29)) || !days[29].Day.Equal(midnight) {
			t.Fatalf("days %d from %v to %v", len(days), days[0].Day, days[len(days)-1].Day)
		}
		today, yesterday, first := days[29], days[28], days[0]
		if today.Tasks != 3 || today.Completed != 1 || today.Failed != 1 || today.ChargedMicros != 2_000_004 {
			t.Errorf("today: %+v, want 3 tasks (1 completed, 1 failed) and $2.000004 charged", today)
		}
		if yesterday.Tasks != 1 || yesterday.Completed != 1 || yesterday.ChargedMicros != 1_234_567 {
			t.Errorf("yesterday: %+v, want the task and the charge a microsecond before midnight UTC", yesterday)
		}
		if first.Tasks != 1 || first.ChargedMicros != 0 {
			t.Errorf("the first day: %+v", first)
		}
		var tasks, charged int64
		for _, day := range days {
			tasks += day.Tasks
			charged += day.ChargedMicros
		}
		if tasks != 5 || charged != 3_234_571 {
			t.Errorf("30 days: %d tasks, %d µ$ charged; want 5 and 3234571 (nothing from before the first day)", tasks, charged)
		}
	})
}

// TestEndpointErrors: the last hour's calls are counted per endpoint — ids folded into {id} — with their
// 4xx and 5xx, the endpoints with server errors first; older calls are left out.
func TestEndpointErrors(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		now := time.Now().UTC().Truncate(time.Microsecond)
		call := func(method, path string, status int, at time.Time) {
			if err := d.W.Create(&models.CallLog{At: at, RequestID: fmt.Sprintf("req_%d", at.UnixNano()), Method: method, Path: path, Status: status}).Error; err != nil {
				t.Fatal(err)
			}
			now = now.Add(-time.Microsecond) // distinct request ids
		}
		recent := now.Add(-10 * time.Minute)
		call("GET", "/v1/videos/video_AAAAAAAAAAAA", 200, recent)
		call("GET", "/v1/videos/video_BBBBBBBBBBBB", 404, recent)
		call("GET", "/v1/videos/video_CCCCCCCCCCCC/content", 502, recent)
		call("GET", "/v1/Videos/video_DDDDDDDDDDDD/", 200, recent)
		call("POST", "/v1/videos", 200, recent)
		call("POST", "/v1/videos", 402, recent)
		call("POST", "/v1/videos", 500, now.Add(-2*time.Hour)) // before the hour
		got, err := ops.EndpointErrors(context.Background(), d, now.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want := []ops.Endpoint{
			{Method: "GET", Path: "/v1/videos/{id}/content", Calls: 1, ServerErrors: 1},
			{Method: "GET", Path: "/v1/videos/{id}", Calls: 3, ClientErrors: 1},
			{Method: "POST", Path: "/v1/videos", Calls: 2, ClientErrors: 1},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("endpoints:\n got %+v\nwant %+v", got, want)
		}
		if r := got[1].ErrorRate(); r < 0.333 || r > 0.334 {
			t.Errorf("error rate of %+v: %v", got[1], r)
		}
	})
}

func TestNormalizePath(t *testing.T) {
	for in, want := range map[string]string{
		"/v1/videos":                           "/v1/videos",
		"/v1/videos/video_4f9XkLmN2pQr8sTu":    "/v1/videos/{id}",
		"/v1/videos/video_4f9XkLmN2pQr8sTu/":   "/v1/videos/{id}",
		"/V1/Videos/video_4f9XkLmN2pQr8sTu":    "/v1/videos/{id}",
		"/v1/videos/video_4f9XkLmN/content":    "/v1/videos/{id}/content",
		"/media/file_0123456789abcdef":         "/media/{id}",
		"/support/calls/req_Zx81aa0099bb":      "/support/calls/{id}",
		"/support/accounts/42/tasks":           "/support/accounts/{id}/tasks",
		"/uploads/v1/files":                    "/uploads/v1/files",
		"/":                                    "/",
		"":                                     "/",
		"/v1/image_to_video":                   "/v1/image_to_video",
		"/v1/image_variations":                 "/v1/image_variations",
		"/v1/videos/video_4f9XkLmN?x=1":        "/v1/videos/video_4f9xklmn?x=1",
		"/v1/videos/topup_ABCDEFGH/content/42": "/v1/videos/{id}/content/{id}",
	} {
		if got := ops.NormalizePath(in); got != want {
			t.Errorf("NormalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSignals: the figures the alerts watch. Overdue are the tasks holding a slot — queued upstream or in
// progress — whose run deadline has passed, not one due later, waiting for a slot or finished; the mail
// outbox's backlog is what is neither sent nor given up, its age the oldest of those; the last Stripe
// reconciliation is the newest row, and none before the first.
func TestSignals(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := openDB(t, url)
		ctx := context.Background()
		acct := testkit.NewAccount(t, d, "100")
		now := time.Date(2026, 11, 23, 15, 0, 0, 0, time.UTC)
		cred := "sim-signals"
		if err := d.W.Create(&models.UpstreamCredential{ID: cred, Provider: "sim", Label: "s", MaxConcurrency: 9, Enabled: true,
			CreatedAt: now, UpdatedAt: now}).Error; err != nil {
			t.Fatal(err)
		}
		n := 0
		task := func(status string, credential *string, deadline *time.Time) {
			n++
			created := now.Add(-time.Hour)
			if err := d.W.Create(&models.Task{ID: fmt.Sprintf("video_signal%04d", n), AccountID: acct.ID, Model: "m", Prompt: "p", Seconds: 4,
				Size: "1x1", AspectRatio: "1:1", Inputs: "{}", Status: status, PriceMicros: 1, AmountMicros: 4, BillingState: "reserved",
				CredentialID: credential, RunDeadline: deadline, SubmittedAt: &created, NextCheckAt: created, QueueDeadline: created,
				CreatedAt: created, UpdatedAt: created}).Error; err != nil {
				t.Fatal(err)
			}
		}
		past, later, exactly := now.Add(-time.Minute), now.Add(time.Minute), now
		task("queued", &cred, &past)      // queued upstream, overdue
		task("in_progress", &cred, &past) // overdue
		task("in_progress", &cred, &later)
		task("in_progress", &cred, &exactly) // due now, not past
		task("queued", nil, nil)             // waiting for a slot
		task("failed", &cred, &past)         // ended
		if got, err := ops.OverdueTasks(ctx, d, now); err != nil || got != 2 {
			t.Errorf("OverdueTasks = %d, %v; want 2", got, err)
		}

		qs, err := ops.JobQueuesNow(ctx, d)
		if err != nil || len(qs) != 4 || qs[0].Name != "mail" || qs[0].States["available"] != 0 || qs[0].Waiting(now) != 0 {
			t.Fatalf("empty queues: %+v, %v", qs, err)
		}
		// River's rows as its drivers write them: times as text on SQLite, errors a JSON array there and an
		// array of jsonb on PostgreSQL.
		job := func(queue, state string, due time.Time, attempted *time.Time, errText string) {
			at, att := any(due), any(nil)
			if attempted != nil {
				att = *attempted
			}
			errs, fin := any(nil), any(nil)
			if state == "completed" || state == "discarded" {
				fin = now
			}
			if !d.Postgres {
				at = due.UTC().Format("2006-01-02 15:04:05.000")
				if attempted != nil {
					att = attempted.UTC().Format("2006-01-02 15:04:05.000")
				}
				if fin != nil {
					fin = now.UTC().Format("2006-01-02 15:04:05.000")
				}
			}
			q := "INSERT INTO river_job (args, kind, queue, state, scheduled_at, attempted_at, finalized_at, attempt, max_attempts, errors) VALUES (jsonb('{}'), 'test_kind', ?, ?, ?, ?, ?, 1, 5, "
			if errText != "" {
				errs = `{"at":"2026-01-01T00:00:00Z","attempt":1,"error":"` + errText + `","trace":""}`
				if d.Postgres {
					q += "ARRAY[CAST(? AS jsonb)])"
				} else {
					q += "jsonb('[' || ? || ']'))"
				}
			} else {
				q += "?)"
			}
			if d.Postgres {
				q = strings.Replace(q, "jsonb('{}')", "'{}'::jsonb", 1)
				q = strings.Replace(q, "?, ?, ?, ?, ?", "?, CAST(? AS river_job_state), ?, ?, ?", 1)
			}
			if err := d.W.Exec(q, queue, state, at, att, fin, errs).Error; err != nil {
				t.Fatal(err)
			}
		}
		early, late := now.Add(-7*time.Minute), now.Add(-time.Minute)
		job("mail", "available", late, nil, "")
		job("mail", "available", early, nil, "")
		job("mail", "completed", early, &early, "") // done: not counted
		job("webhooks", "retryable", now.Add(time.Hour), &late, "answered 500")
		job("payments", "discarded", early, &early, "stripe unreachable")
		job("chores", "scheduled", now.Add(time.Hour), nil, "")
		if qs, err = ops.JobQueuesNow(ctx, d); err != nil {
			t.Fatal(err)
		}
		got := map[string]map[string]int64{}
		for _, q := range qs {
			got[q.Name] = q.States
		}
		if got["mail"]["available"] != 2 || got["mail"]["completed"] != 0 || got["webhooks"]["retryable"] != 1 ||
			got["payments"]["discarded"] != 1 || got["chores"]["scheduled"] != 1 {
			t.Errorf("jobs by queue and state: %v", got)
		}
		if w := qs[0].Waiting(now); w < 7*time.Minute || w > 7*time.Minute+time.Millisecond {
			t.Errorf("the mail queue's longest wait: %s, want 7m", w)
		}
		if w := qs[1].Waiting(now); w != 0 {
			t.Errorf("the webhooks queue's wait: %s, want 0 (its job waits for its retry, not for a worker)", w)
		}
		errs, err := ops.LastJobErrors(ctx, d, 5)
		if err != nil || len(errs) != 2 || errs[0].Error != "answered 500" || errs[0].Queue != "webhooks" || errs[0].At.Sub(late).Abs() > time.Millisecond ||
			errs[1].Error != "stripe unreachable" || errs[1].State != "discarded" {
			t.Errorf("the last errors: %+v, %v", errs, err)
		}

		if run, err := ops.LastReconcile(ctx, d); err != nil || run != nil {
			t.Fatalf("before any reconciliation: %+v, %v", run, err)
		}
		for i, diffs := range []int{3, 0} {
			at := now.Add(time.Duration(i) * time.Hour)
			if err := d.W.Create(&models.StripeReconcileRun{At: at, Owner: "web-1", Since: at.Add(-72 * time.Hour), Differences: diffs}).Error; err != nil {
				t.Fatal(err)
			}
		}
		if run, err := ops.LastReconcile(ctx, d); err != nil || run == nil || run.Differences != 0 || !run.At.Equal(now.Add(time.Hour)) {
			t.Errorf("the last reconciliation: %+v, %v; want the newest, with no differences", run, err)
		}
	})
}
