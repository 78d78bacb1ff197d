package handlers_test

import (
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestCallLogRetention: the janitor deletes call-log rows older than CALL_LOG_RETENTION (90 days by
// default) and keeps younger ones; the ledger and the audit log, however old, are never deleted.
func TestCallLogRetention(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"MEDIA_SWEEP_INTERVAL": "100ms"})
		acct := s.NewAccount(t, "10")
		if r := s.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatalf("models: %d", r.Status)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		day := 24 * time.Hour
		old := now.Add(-2000 * day)
		rows := []models.CallLog{
			{At: now.Add(-91 * day), RequestID: "req_expired1", AccountID: &acct.ID, Method: "GET", Path: "/v1/models", Status: 200},
			{At: now.Add(-400 * day), RequestID: "req_expired2", AccountID: &acct.ID, Method: "POST", Path: "/v1/videos", Status: 402},
			{At: now.Add(-89 * day), RequestID: "req_kept", AccountID: &acct.ID, Method: "GET", Path: "/v1/models", Status: 200},
		}
		if err := s.DB.W.Create(&rows).Error; err != nil {
			t.Fatal(err)
		}
		// The ledger and the audit log get entries far older than any retention.
		if err := s.DB.W.Model(&models.LedgerEntry{}).Where("account_id = ?", acct.ID).Update("created_at", old).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.DB.W.Create(&models.AuditEntry{At: old, Actor: "cli", Action: "balance.credit", TargetType: "account"}).Error; err != nil {
			t.Fatal(err)
		}
		count := func(model any, where string, args ...any) int64 {
			t.Helper()
			var n int64
			if err := s.DB.R.Model(model).Where(where, args...).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		entries, audits := count(&models.LedgerEntry{}, "1 = 1"), count(&models.AuditEntry{}, "1 = 1")

		testkit.Eventually(t, 20*time.Second, "call-log rows past 90 days are deleted", func() bool {
			return count(&models.CallLog{}, "request_id IN ?", []string{"req_expired1", "req_expired2"}) == 0
		})
		if count(&models.CallLog{}, "request_id = ?", "req_kept") != 1 {
			t.Error("a call-log row 89 days old was deleted")
		}
		testkit.Eventually(t, 20*time.Second, "the call just made is in the call log", func() bool {
			return count(&models.CallLog{}, "path = ? AND at > ?", "/v1/models", now.Add(-time.Hour)) == 1
		})
		if n := count(&models.LedgerEntry{}, "1 = 1"); n != entries || n == 0 {
			t.Errorf("ledger entries: %d, were %d", n, entries)
		}
		if n := count(&models.AuditEntry{}, "1 = 1"); n != audits || n == 0 {
			t.Errorf("audit log entries: %d, were %d", n, audits)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
