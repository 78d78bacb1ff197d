package handlers_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

func TestIdempotencyKey(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "100")
		other := s.NewAccount(t, "100")
		body := map[string]any{"model": "videogen-2.0-480p", "prompt": "waves at dusk"}
		reserves := func(accountID int64) int64 {
			var n int64
			s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ? AND kind = 'reserve'", accountID).Count(&n)
			return n
		}

		first := s.Do(t, "POST", "/v1/videos", acct.Key, body, "Idempotency-Key", "order-1")
		if first.Status != 200 || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		id := first.JSON(t)["id"]

		// Same key, same meaning (defaults spelled out, keys reordered): same task, nothing reserved.
		again := s.Do(t, "POST", "/v1/videos", acct.Key, `{"seconds":"4","prompt":"waves at dusk","model":"videogen-2.0-480p","aspect_ratio":"16:9"}`, "Idempotency-Key", "order-1")
		if again.Status != 200 || again.JSON(t)["id"] != id || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s", again.Status, again.Body)
		}
		if n := reserves(acct.ID); n != 1 {
			t.Fatalf("%d reserve entries after a replay, want 1", n)
		}

		// Same key, different body: 409.
		conflict := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "waves at dawn"}, "Idempotency-Key", "order-1")
		if conflict.Status != 409 || conflict.ErrorCode() != "idempotency_conflict" {
			t.Fatalf("conflict: %d %s", conflict.Status, conflict.Body)
		}

		// Keys are scoped to the account: another account's same key makes its own task.
		theirs := s.Do(t, "POST", "/v1/videos", other.Key, body, "Idempotency-Key", "order-1")
		if theirs.Status != 200 || theirs.JSON(t)["id"] == id {
			t.Fatalf("other account: %d %s", theirs.Status, theirs.Body)
		}

		// Concurrent requests with one new key make exactly one task.
		var wg sync.WaitGroup
		ids := make([]any, 10)
		codes := make([]int, 10)
		for i := range ids {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				r := s.Do(t, "POST", "/v1/videos", acct.Key, body, "Idempotency-Key", "burst")
				codes[i] = r.Status
				if r.Status == 200 {
					ids[i] = r.JSON(t)["id"]
				}
			}(i)
		}
		wg.Wait()
		for i := range ids {
			if codes[i] != 200 || ids[i] != ids[0] {
				t.Fatalf("concurrent replays: statuses %v ids %v", codes, ids)
			}
		}
		if n := reserves(acct.ID); n != 2 {
			t.Fatalf("%d reserve entries, want 2", n)
		}

		// After 24 hours the key is free again: it makes a new task.
		s.DB.W.Exec("UPDATE idempotency_keys SET created_at = ? WHERE key = 'order-1' AND account_id = ?", time.Now().UTC().Add(-25*time.Hour), acct.ID)
		later := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "something else"}, "Idempotency-Key", "order-1")
		if later.Status != 200 || later.JSON(t)["id"] == id {
			t.Fatalf("after 24 h: %d %s", later.Status, later.Body)
		}

		long := s.Do(t, "POST", "/v1/videos", acct.Key, body, "Idempotency-Key", strings.Repeat("k", 256))
		if long.Status != 400 || long.ErrorCode() != "invalid_request" {
			t.Fatalf("long key: %d %s", long.Status, long.Body)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
