package mail_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"videogen/internal/domain/accounts"
	"videogen/internal/infra/db"
	"videogen/internal/infra/mail"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestMigrationMovesPendingMailToRiver: a database at schema 31 holds, in the old shape, an e-mail still
// pending (after two failed attempts), one sent and one given up, and a password-reset request waiting;
// migration 32 turns the pending ones into River jobs and drops the old columns and table. A server started
// on it then delivers the pending e-mail and the reset's link, each exactly once, and nothing else.
func TestMigrationMovesPendingMailToRiver(t *testing.T) {
	testkit.EachEmptyDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		const secret = "migration-test-app-secret-0123456789"
		d, err := db.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.MigrateTo(ctx, 31); err != nil {
			t.Fatal(err)
		}
		if _, err := accounts.Create(ctx, d, accounts.NewUser{Email: "reset@example.com", Password: "paper-boats-float-42", Verified: true}); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		old := func(to, key string, sent, failed *time.Time) {
			t.Helper()
			body, err := mail.SealedBody([]string{secret}, key, to, "the body of "+key)
			if err != nil {
				t.Fatal(err)
			}
			if sent != nil || failed != nil {
				body = nil
			}
			if err := d.W.Exec(`INSERT INTO mail_outbox (kind, recipient, subject, sealed_body, idempotency_key, attempts, created_at,
				next_attempt_at, lease_owner, lease_until, sent_at, failed_at, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"verify", to, "Confirm your address", body, key, 2, now.Add(-time.Minute), now.Add(-time.Second), "gone-instance",
				now.Add(-30*time.Second), sent, failed, "provider unavailable").Error; err != nil {
				t.Fatal(err)
			}
		}
		old("pending@example.com", "verify/pending-key", nil, nil)
		old("sent@example.com", "verify/sent-key", &now, nil)
		old("failed@example.com", "verify/failed-key", nil, &now)
		if err := d.W.Exec("INSERT INTO reset_requests (email, requested_at, client_ip, device_user_id, device_epoch) VALUES (?, ?, ?, ?, ?)",
			"reset@example.com", now.Add(-2*time.Second), "192.0.2.7", nil, "").Error; err != nil {
			t.Fatal(err)
		}
		if _, err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		_ = d.Close()

		s := testkit.Start(t, dbURL, map[string]string{"APP_SECRET": secret, "WORKERS": "false"})
		for _, to := range []string{"pending@example.com", "reset@example.com"} {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := s.Mails.WaitFor(wctx, to)
			cancel()
			if err != nil {
				t.Fatalf("no e-mail to %s after the upgrade: %v", to, err)
			}
		}
		// Every job done: nothing more can be sent.
		testkit.Eventually(t, 30*time.Second, "every job finished", func() bool {
			res, err := s.Queue.Client().JobList(ctx, river.NewJobListParams().Kinds(mail.SendArgs{}.Kind(), "password_reset").
				States(rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled))
			return err == nil && len(res.Jobs) == 0
		})
		got := map[string][]mail.Message{}
		for _, m := range s.Mails.Messages() {
			got[m.To] = append(got[m.To], m)
		}
		if len(got) != 2 || len(got["pending@example.com"]) != 1 || len(got["reset@example.com"]) != 1 {
			t.Fatalf("sent after the upgrade: %v; want one e-mail each to pending@ and reset@", got)
		}
		if m := got["pending@example.com"][0]; m.IdempotencyKey != "verify/pending-key" || m.Text != "the body of verify/pending-key" {
			t.Fatalf("the pending e-mail went out as %+v", m)
		}
		if m := got["reset@example.com"][0]; !strings.Contains(m.Text, "/password/reset?token=") {
			t.Fatalf("the reset e-mail: %+v", m)
		}
		var rows []models.MailOutbox
		if err := s.DB.R.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.SentAt == nil && r.FailedAt == nil {
				t.Errorf("e-mail to %s still pending after the upgrade", r.Recipient)
			}
		}
	})
}
