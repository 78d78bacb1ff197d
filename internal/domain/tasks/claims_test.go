package tasks_test

import (
	"context"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/ids"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestNextDue: the earliest moment a task may be claimed is the next check of an unleased task in
// flight, or the end of a lease; tasks waiting for a credential and finished tasks are no one's next.
func TestNextDue(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d := testkit.OpenDB(t, dbURL)
		now := time.Now().UTC().Truncate(time.Microsecond)
		cred := models.UpstreamCredential{ID: "c", Provider: "openai", Label: "c", Enabled: true, MaxConcurrency: 10, CreatedAt: now, UpdatedAt: now}
		if err := d.W.Create(&cred).Error; err != nil {
			t.Fatal(err)
		}
		acct := testkit.NewAccount(t, d, "10")
		store := tasks.NewStore(d, time.Now)
		add := func(status string, credential *string, check time.Time, lease *time.Time) {
			t.Helper()
			task := &models.Task{ID: ids.NewVideoID(), AccountID: acct.ID, Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4,
				Size: "1280x720", AspectRatio: "16:9", Inputs: "{}", Status: status, BillingState: "reserved", CredentialID: credential,
				NextCheckAt: check, LeaseUntil: lease, QueueDeadline: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
			if lease != nil {
				owner := "w"
				task.LeaseOwner = &owner
			}
			if err := d.W.Create(task).Error; err != nil {
				t.Fatal(err)
			}
		}
		at := func(d time.Duration) time.Time { return now.Add(d) }
		ptr := func(t time.Time) *time.Time { return &t }
		steps := []struct {
			name string
			add  func()
			want time.Time // zero: none
		}{
			{"no tasks", func() {}, time.Time{}},
			{"waiting for a credential", func() { add(tasks.Queued, nil, at(-time.Hour), nil) }, time.Time{}},
			{"finished", func() { add(tasks.Completed, &cred.ID, at(-time.Hour), nil) }, time.Time{}},
			{"in flight, checked in 3 s", func() { add(tasks.InProgress, &cred.ID, at(3*time.Second), nil) }, at(3 * time.Second)},
			{"leased until 2 s, its check long due", func() { add(tasks.Queued, &cred.ID, at(-time.Hour), ptr(at(2*time.Second))) }, at(2 * time.Second)},
			{"in flight, checked in 1 s", func() { add(tasks.InProgress, &cred.ID, at(time.Second), nil) }, at(time.Second)},
		}
		for _, step := range steps {
			step.add()
			next, ok, err := store.NextDue(ctx)
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if ok != !step.want.IsZero() || !next.Equal(step.want) {
				t.Fatalf("%s: next due %v (%v), want %v", step.name, next, ok, step.want)
			}
		}
	})
}
