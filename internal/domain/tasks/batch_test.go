package tasks_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestBatchedTransitionsUnderConcurrency: the batched transitions of the worker's path — AssignWaiting
// (a batch of waiting tasks given credentials in one transaction), MarkSubmitted and Complete (group
// committed) — called from many goroutines at once, as two instances' handlers call them, keep every
// count exact: no task is assigned twice, no credential takes more than its capacity, each completion
// is settled once with its ledger entry, in_flight and the backlogs come back to what is left, and the
// ledger audit finds nothing.
func TestBatchedTransitionsUnderConcurrency(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "MAX_QUEUED_PER_ACCOUNT": "100",
			"SIM_CREDENTIALS": "2", "SIM_CONCURRENCY": "20"})
		ctx := context.Background()
		const perAccount = 15 // 3 accounts: 45 tasks for 2 × 20 slots
		var all []string
		var accts []testkit.Account
		for a := 0; a < 3; a++ {
			acct := s.NewAccount(t, "100")
			accts = append(accts, acct)
			for i := 0; i < perAccount; i++ {
				all = append(all, s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": fmt.Sprint(a, "-", i)})["id"].(string))
			}
		}
		// The first account's endpoint receives completions, the second's only failures: each completion
		// of the first account's tasks writes one event, to one delivery; the second's none.
		now := time.Now().UTC()
		for i, typ := range []string{"video.completed", "video.failed"} {
			ep := models.WebhookEndpoint{ID: fmt.Sprint("we_", i), AccountID: accts[i].ID, URL: "https://hooks.example.com/", Events: typ,
				SecretSealed: []byte{1}, SecretHint: "h", Enabled: true, CreatedAt: now, UpdatedAt: now}
			if err := s.DB.W.Create(&ep).Error; err != nil {
				t.Fatal(err)
			}
		}
		routing := tasks.Routing{
			Credentials: s.Pool.IDs(),
			Aliases:     s.Pool.Aliases,
			Candidates: func(t *models.Task) ([]string, error) {
				req, err := t.Request()
				return s.Pool.Candidates(req), err
			},
			UpstreamModel: func(credID, alias string) string {
				c, _ := s.Pool.Credential(credID)
				return c.Models[alias].UpstreamModel
			},
		}

		// Four claimers, two owners, until nothing more can be assigned.
		var mu sync.Mutex
		assigned := map[string]models.Task{}
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := s.Tasks.AssignWaiting(ctx, fmt.Sprint("owner-", w%2), time.Minute, 7, routing, time.Hour, time.Now())
					if err != nil {
						t.Error(err)
						return
					}
					if len(got.Tasks) == 0 {
						return
					}
					mu.Lock()
					for _, x := range got.Tasks {
						if _, twice := assigned[x.ID]; twice {
							t.Errorf("task %s assigned twice", x.ID)
						}
						assigned[x.ID] = x
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(assigned) != 40 {
			t.Fatalf("%d tasks assigned, want the 40 slots filled", len(assigned))
		}
		for _, c := range credentials(t, s) {
			if c.InFlight != 20 {
				t.Errorf("credential %s: %d in flight, want 20", c.ID, c.InFlight)
			}
		}
		testkit.CheckLedger(t, s.DB) // in_flight and waiting_tasks agree with the tasks

		// Submitted and completed, all at once.
		each := func(fn func(x *models.Task)) {
			var wg sync.WaitGroup
			for id := range assigned {
				x := assigned[id]
				wg.Add(1)
				go func() {
					defer wg.Done()
					fn(&x)
				}()
			}
			wg.Wait()
		}
		each(func(x *models.Task) {
			if err := s.Tasks.MarkSubmitted(ctx, x, "up-"+x.ID, time.Now(), true); err != nil {
				t.Error(err)
			}
		})
		var completed sync.Map
		each(func(x *models.Task) {
			won, err := s.Tasks.Complete(ctx, x, tasks.Output{Key: "outputs/" + x.ID + "/v.mp4", Size: 5000}, time.Now().Add(time.Hour), tasks.Cost{})
			if err != nil || !won {
				t.Errorf("complete %s: won %v, %v", x.ID, won, err)
			}
			completed.Store(x.ID, true)
		})
		// A second completion of the same task changes nothing.
		for id := range assigned {
			x := assigned[id]
			if won, err := s.Tasks.Complete(ctx, &x, tasks.Output{Key: "outputs/" + id + "/again.mp4", Size: 1}, time.Now(), tasks.Cost{}); won || err != nil {
				t.Fatalf("second completion of %s: won %v, %v", id, won, err)
			}
			break
		}
		for _, id := range all {
			row := testkit.Task(t, s.DB, id)
			_, done := completed.Load(id)
			switch {
			case done && (row.Status != tasks.Completed || row.BillingState != "settled" || row.UpstreamTaskID == nil || *row.UpstreamTaskID != "up-"+id):
				t.Errorf("completed task %s: %s/%s", id, row.Status, row.BillingState)
			case !done && (row.Status != tasks.Queued || row.CredentialID != nil):
				t.Errorf("waiting task %s: %s on %v", id, row.Status, row.CredentialID)
			}
			if n := len(testkit.Entries(t, s.DB, id)); done && n != 2 {
				t.Errorf("completed task %s has %d ledger entries, want reserve and settle", id, n)
			}
		}
		byAccount := map[int64]int{}
		for id := range assigned {
			byAccount[assigned[id].AccountID]++
		}
		for i, want := range []int{byAccount[accts[0].ID], 0} {
			var events, deliveries int64
			s.DB.R.Model(&models.WebhookEvent{}).Where("account_id = ? AND type = ?", accts[i].ID, "video.completed").Count(&events)
			s.DB.R.Model(&models.WebhookDelivery{}).Where("endpoint_id = ?", fmt.Sprint("we_", i)).Count(&deliveries)
			if events != int64(want) || deliveries != int64(want) {
				t.Errorf("account %d: %d video.completed events and %d deliveries, want %d", i, events, deliveries, want)
			}
		}
		for _, c := range credentials(t, s) {
			if c.InFlight != 0 {
				t.Errorf("credential %s: %d in flight after every task ended", c.ID, c.InFlight)
			}
		}
		testkit.CheckLedger(t, s.DB)

		// The five left get the freed slots.
		got, err := s.Tasks.AssignWaiting(ctx, "owner-0", time.Minute, 64, routing, time.Hour, time.Now())
		if err != nil || len(got.Tasks) != 5 {
			t.Fatalf("the last waiting tasks: %d assigned, %v", len(got.Tasks), err)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func credentials(t *testing.T, s *testkit.Server) []models.UpstreamCredential {
	t.Helper()
	var out []models.UpstreamCredential
	if err := s.DB.R.Order("id").Find(&out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}
