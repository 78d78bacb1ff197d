package ops_test

import (
	"context"
	"fmt"
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

		boxes, err := ops.Outboxes(ctx, d, now)
		if err != nil || len(boxes) != 2 || boxes[0].Name != "mail" || boxes[0].Pending != 0 || boxes[0].OldestAge(now) != 0 ||
			boxes[1].Name != "webhook" || boxes[1].Pending != 0 || boxes[1].OldestAge(now) != 0 {
			t.Fatalf("empty outboxes: %+v, %v", boxes, err)
		}
		mail := func(created time.Time, sent, failed *time.Time) {
			n++
			if err := d.W.Create(&models.MailOutbox{Kind: "verify", Recipient: "a@example.com", Subject: "s", IdempotencyKey: fmt.Sprintf("k%d", n),
				CreatedAt: created, SentAt: sent, FailedAt: failed}).Error; err != nil {
				t.Fatal(err)
			}
		}
		mail(now.Add(-3*time.Hour), &now, nil) // sent
		mail(now.Add(-2*time.Hour), nil, &now) // given up
		mail(now.Add(-20*time.Minute), nil, nil)
		mail(now.Add(-time.Minute), nil, nil)
		// Webhook deliveries: only those due now, to enabled endpoints, are ours to be
		// late with; a customer's endpoint waiting for its next retry is not.
		for _, ep := range []models.WebhookEndpoint{{ID: "we_on", Enabled: true}, {ID: "we_off"}} {
			ep.AccountID, ep.URL, ep.Events, ep.SecretSealed, ep.SecretHint, ep.CreatedAt, ep.UpdatedAt = acct.ID, "https://h.example.com/", "video.completed", []byte{1}, "h", now, now
			if err := d.W.Create(&ep).Error; err != nil {
				t.Fatal(err)
			}
		}
		hook := func(ep string, due *time.Time) {
			n++
			ev := fmt.Sprintf("evt_signal%04d", n)
			if err := d.W.Create(&models.WebhookEvent{ID: ev, AccountID: acct.ID, Type: "video.completed", SubjectID: "video_x", Payload: "{}", CreatedAt: now.Add(-time.Hour)}).Error; err != nil {
				t.Fatal(err)
			}
			if err := d.W.Create(&models.WebhookDelivery{EventID: ev, EndpointID: ep, CreatedAt: now.Add(-time.Hour), NextAttemptAt: due}).Error; err != nil {
				t.Fatal(err)
			}
		}
		late, soon := now.Add(-7*time.Minute), now.Add(time.Hour)
		hook("we_on", &late)
		hook("we_on", &past)
		hook("we_on", &soon)  // waiting for its retry
		hook("we_on", nil)    // delivered or given up
		hook("we_off", &late) // its endpoint is disabled
		boxes, err = ops.Outboxes(ctx, d, now)
		if err != nil || len(boxes) != 2 || boxes[0].Pending != 2 || boxes[0].OldestAge(now) != 20*time.Minute {
			t.Errorf("mail outbox: %+v (oldest %v), %v; want 2 pending, the oldest 20 minutes old", boxes, boxes[0].OldestAge(now), err)
		}
		if err != nil || len(boxes) != 2 || boxes[1].Pending != 2 || boxes[1].OldestAge(now) != 7*time.Minute {
			t.Errorf("webhook outbox: %+v, %v; want 2 due, the oldest 7 minutes late", boxes, err)
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
