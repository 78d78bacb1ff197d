package handlers_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestConcurrentCreatesReserveExactly funds an account for exactly N tasks and sends 4N creates at once:
// exactly N are accepted, 3N get 402, none gets a 5xx (no SQLITE_BUSY), and the ledger invariant holds
// while the accepted tasks run to completion.
func TestConcurrentCreatesReserveExactly(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const n = 12
		s := testkit.Start(t, dbURL, map[string]string{"MAX_QUEUED_PER_ACCOUNT": "1000"})
		// 720p costs 0.30/s; 4 s = 1.20 per task. Funded in two adjustments: the entries must add up.
		acct := s.NewAccount(t, "10.00")
		credit(t, s, acct, fmt.Sprintf("%d.%02d", (n*120-1000)/100, (n*120-1000)%100))
		extra := s.NewAccount(t, "5") // a neighbour whose balance must not move

		start := make(chan struct{})
		var wg sync.WaitGroup
		statuses := make([]int, 4*n)
		bodies := make([]string, 4*n)
		for i := range statuses {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": fmt.Sprintf("task %d", i)})
				statuses[i], bodies[i] = r.Status, r.ErrorCode()
			}(i)
		}
		close(start)
		wg.Wait()
		count := map[int]int{}
		for i, st := range statuses {
			count[st]++
			if st == 402 && bodies[i] != "insufficient_balance" {
				t.Errorf("402 with code %q", bodies[i])
			}
		}
		if count[200] != n || count[402] != 3*n || len(count) != 2 {
			t.Fatalf("statuses %v, want %d×200 and %d×402", count, n, 3*n)
		}
		testkit.CheckLedger(t, s.DB)

		// Let the accepted tasks finish: every reservation settles, the wallet ends at zero.
		var open int64
		// Each accepted video is rendered by the simulator under -race, beside the other database's run:
		// on a loaded 2-core machine that can take minutes. The wait ends as soon as the last one finishes.
		testkit.Eventually(t, 3*time.Minute, "every accepted task finishes", func() bool {
			s.DB.R.Model(&models.Task{}).Where("account_id = ? AND status NOT IN ?", acct.ID, []string{"completed", "failed"}).Count(&open)
			return open == 0
		}, func() string { return fmt.Sprintf("%d tasks still open", open) })
		var a, neighbour models.Account
		s.DB.R.Take(&a, acct.ID)
		s.DB.R.Take(&neighbour, extra.ID)
		if a.AvailableMicros != 0 || a.ReservedMicros != 0 || neighbour.AvailableMicros != 5_000_000 {
			t.Fatalf("after completion: available %d reserved %d (neighbour %d), want 0 0 5000000", a.AvailableMicros, a.ReservedMicros, neighbour.AvailableMicros)
		}
		var settles int64
		s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ? AND kind = ?", acct.ID, models.KindSettle).Count(&settles)
		if settles != n {
			t.Fatalf("%d settle entries, want %d", settles, n)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestInsufficientBalanceWritesNothing: a 402 leaves no task, no entry and no balance change.
func TestInsufficientBalanceWritesNothing(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1.19") // one cent short of a 4 s 720p task
		r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "x"})
		if r.Status != 402 || r.ErrorCode() != "insufficient_balance" || !strings.Contains(string(r.Body), "costs $1.20 but your available balance is $1.19") {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
		var tasks, entries int64
		s.DB.R.Model(&models.Task{}).Count(&tasks)
		s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ?", acct.ID).Count(&entries)
		var a models.Account
		s.DB.R.Take(&a, acct.ID)
		if tasks != 0 || entries != 1 || a.AvailableMicros != 1_190_000 || a.ReservedMicros != 0 {
			t.Fatalf("tasks %d entries %d available %d reserved %d", tasks, entries, a.AvailableMicros, a.ReservedMicros)
		}
		// A cheaper model fits: mini 480p costs 0.05/s × 4 = 0.20, and the price is frozen on the task.
		v := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "x"})
		if b := v["billing"].(map[string]any); b["amount"] != "0.200000" || b["state"] != "reserved" || b["currency"] != "usd" {
			t.Fatalf("billing %v", b)
		}
		task := testkit.Task(t, s.DB, v["id"].(string))
		if task.PriceMicros != 50_000 || task.AmountMicros != 200_000 {
			t.Fatalf("frozen price %d amount %d", task.PriceMicros, task.AmountMicros)
		}
		// A later price change (as an admin edit does it) applies to new tasks only.
		s.DB.W.Exec("UPDATE prices SET micros_per_second = 90000 WHERE model = 'videogen-2.0-mini-480p'")
		s.Videos.Prices.Invalidate()
		credit(t, s, acct, "1")
		later := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "y"})
		if b := later["billing"].(map[string]any); b["amount"] != "0.360000" {
			t.Fatalf("new task at the new price: %v", b)
		}
		if again := s.Do(t, "GET", "/v1/videos/"+v["id"].(string), acct.Key, nil).JSON(t); again["billing"].(map[string]any)["amount"] != "0.200000" {
			t.Fatalf("the first task's price moved: %v", again["billing"])
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func credit(t *testing.T, s *testkit.Server, acct testkit.Account, usd string) {
	t.Helper()
	if err := creditUSD(s, acct.ID, usd); err != nil {
		t.Fatal(err)
	}
}
