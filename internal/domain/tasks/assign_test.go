package tasks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/ids"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestAssignWaitingLeastLoaded: a waiting task goes to the candidate with the lowest share of its capacity
// in flight — never to a full one, nor one whose key a provider refused, nor one outside the
// candidates — and the share is computed without overflow on large pools (PostgreSQL's INTEGER). A
// credential that no longer serves the alias (a reload raced the choice) takes nothing.
func TestAssignWaitingLeastLoaded(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d := testkit.OpenDB(t, dbURL)
		now := time.Now().UTC().Truncate(time.Microsecond)
		refused := "401 invalid_api_key"
		for _, c := range []models.UpstreamCredential{
			{ID: "big", MaxConcurrency: 5000, InFlight: 2200}, // 44 %
			{ID: "mid", MaxConcurrency: 4, InFlight: 1},       // 25 %
			{ID: "small", MaxConcurrency: 2, InFlight: 1},     // 50 %
			{ID: "full", MaxConcurrency: 1, InFlight: 1},      // 100 %
			{ID: "refused", MaxConcurrency: 10, AuthError: &refused},
			{ID: "other", MaxConcurrency: 10}, // idle, but not a candidate
		} {
			c.Provider, c.Label, c.Enabled, c.CreatedAt, c.UpdatedAt = "openai", c.ID, true, now, now
			if err := d.W.Create(&c).Error; err != nil {
				t.Fatal(err)
			}
		}
		acct := testkit.NewAccount(t, d, "10")
		store := tasks.NewStore(d, time.Now)
		waiting := func(i int) *models.Task {
			task := &models.Task{ID: ids.NewVideoID(), AccountID: acct.ID, Model: "videogen-2.0-720p", Prompt: fmt.Sprint(i), Seconds: 4,
				Size: "1280x720", AspectRatio: "16:9", Inputs: "{}", Status: tasks.Queued, BillingState: "reserved",
				NextCheckAt: now, QueueDeadline: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
			if err := d.W.Create(task).Error; err != nil {
				t.Fatal(err)
			}
			return task
		}
		candidates := []string{"big", "mid", "small", "full", "refused"}
		// The routing the worker gives AssignWaiting, reduced to these credentials; model is what the
		// credentials serve the alias as ("": a reload took it away).
		routing := func(creds []string, model string) tasks.Routing {
			return tasks.Routing{Credentials: creds,
				Aliases:       func([]string) []string { return []string{"videogen-2.0-720p"} },
				Candidates:    func(*models.Task) ([]string, error) { return creds, nil },
				UpstreamModel: func(string, string) string { return model }}
		}
		assign := func(creds []string, model string) []models.Task {
			t.Helper()
			got, err := store.AssignWaiting(ctx, "test", time.Minute, 1, routing(creds, model), time.Hour, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			return got.Tasks
		}
		for i, want := range []string{"mid", "big", "big"} { // mid 1/4 → 2/4 (50 %), then big 44 % → 44.02 %
			task := waiting(i)
			got := assign(candidates, "provider-model")
			if len(got) != 1 || got[0].ID != task.ID || *got[0].CredentialID != want {
				t.Fatalf("task %d: assigned %+v, want it on %q", i, got, want)
			}
			if row := testkit.Task(t, d, task.ID); *row.CredentialID != want || *row.UpstreamModel != "provider-model" {
				t.Fatalf("task row %+v", row)
			}
		}
		// A route that vanished: nothing taken, nothing counted.
		task := waiting(9)
		if got := assign([]string{"small"}, ""); len(got) != 0 {
			t.Fatalf("assigned %+v without a route", got)
		}
		var small models.UpstreamCredential
		d.R.Where("id = ?", "small").Take(&small)
		if small.InFlight != 1 || testkit.Task(t, d, task.ID).CredentialID != nil {
			t.Fatalf("a refused assignment left small at %d in flight", small.InFlight)
		}
	})
}
