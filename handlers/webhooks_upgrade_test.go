package handlers_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"videogen/internal/domain/webhooks"
	"videogen/internal/infra/db"
	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/queue"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestWebhookDeliveriesSurviveTheUpgrade: deliveries pending in the delivery loop's table before the move
// to River — one due for its first attempt, one due for its third — become jobs when the database is
// upgraded, and each is delivered exactly once by the new server, its attempts counted on from where
// they were (docs/jobs.md, "Webhook deliveries").
func TestWebhookDeliveriesSurviveTheUpgrade(t *testing.T) {
	testkit.EachEmptyDB(t, func(t *testing.T, dbURL string) {
		const secret = "upgrade-test-app-secret-0123456789abcdef0123456789abcdef"
		rcv := &hookReceiver{}
		policy := testkit.ServeHTTPSHost(t, "hooks.example.com", rcv)
		ctx := context.Background()
		d, err := db.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.MigrateTo(ctx, 33); err != nil { // the schema before deliveries were River jobs
			t.Fatal(err)
		}
		acct := testkit.NewAccount(t, d, "1")
		q, err := queue.New(d, queue.Config{Now: time.Now}) // only to add the endpoint: it inserts nothing
		if err != nil {
			t.Fatal(err)
		}
		hooks, err := webhooks.New(d, q, mediafetch.New(policy), nil, slog.New(slog.DiscardHandler),
			webhooks.Config{Secrets: []string{secret}, Now: time.Now})
		if err != nil {
			t.Fatal(err)
		}
		ep, _, err := hooks.Add(ctx, acct.ID, "https://hooks.example.com/upgraded", webhooks.EventTypes)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		for i, attempts := range []int{0, 2} {
			ev := []string{"evt_upgrade_first", "evt_upgrade_third"}[i]
			if err := d.W.Exec(`INSERT INTO webhook_events (id, account_id, type, subject_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				ev, acct.ID, webhooks.VideoCompleted, "video_upgrade", `{"id":"`+ev+`","object":"event","created_at":1,"type":"video.completed","data":{"id":"video_upgrade"}}`, now).Error; err != nil {
				t.Fatal(err)
			}
			// The old shape: lease columns, an expired lease of an instance long gone on the second.
			if err := d.W.Exec(`INSERT INTO webhook_deliveries (event_id, endpoint_id, attempts, created_at, next_attempt_at, lease_owner, lease_until)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, ev, ep.ID, attempts, now, now.Add(-time.Minute), []any{nil, "gone-1"}[i], []any{nil, now.Add(-time.Hour)}[i]).Error; err != nil {
				t.Fatal(err)
			}
		}
		_ = d.Close()

		s := testkit.StartWith(t, dbURL, map[string]string{"APP_SECRET": secret}, server.Options{ImportPolicy: &policy})
		testkit.Eventually(t, 10*time.Second, "both pending deliveries delivered", func() bool {
			var n int64
			s.DB.R.Model(&models.WebhookDelivery{}).Where("endpoint_id = ? AND delivered_at IS NOT NULL", ep.ID).Count(&n)
			return n == 2
		})
		var ds []models.WebhookDelivery
		if err := s.DB.R.Where("endpoint_id = ?", ep.ID).Order("id").Find(&ds).Error; err != nil {
			t.Fatal(err)
		}
		if ds[0].Attempts != 1 || ds[1].Attempts != 3 {
			t.Errorf("attempts %d and %d, want 1 and 3 (counted on from before the upgrade)", ds[0].Attempts, ds[1].Attempts)
		}
		// Exactly once: no job of theirs is left to run, and the receiver heard each id once.
		testkit.Eventually(t, 10*time.Second, "no delivery job left", func() bool {
			var left int64
			s.DB.R.Table("river_job").Where("kind = ? AND state NOT IN ?", "webhook_delivery", []string{"completed", "cancelled", "discarded"}).Count(&left)
			return left == 0
		})
		seen := map[string]int{}
		for _, got := range rcv.deliveries() {
			seen[got.Header.Get("webhook-id")]++
			if got.Path != "/upgraded" {
				t.Errorf("a delivery to %s", got.Path)
			}
		}
		if seen["evt_upgrade_first"] != 1 || seen["evt_upgrade_third"] != 1 || len(seen) != 2 {
			t.Errorf("deliveries by webhook-id %v, want each of the two once", seen)
		}
	})
}
