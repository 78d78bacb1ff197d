package admin_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/audit"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/tasks"
	"videogen/internal/staff/admin"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestLastAdminUnderConcurrency: two admins demoting each other at the same moment, round after round,
// always leave exactly one admin — the admins are locked before they are counted, so the second
// transaction sees the first one's demotion (on PostgreSQL; SQLite's single writer serialises them).
func TestLastAdminUnderConcurrency(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d := testkit.OpenDB(t, dbURL)
		var ids [2]int64
		for i, email := range []string{"a@example.com", "b@example.com"} {
			u, err := accounts.Create(ctx, d, accounts.NewUser{Email: email, Role: models.RoleAdmin, Verified: true})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = u.ID
		}
		s := &admin.Service{DB: d, Tasks: tasks.NewStore(d, time.Now), Auth: &auth.Service{DB: d, Now: time.Now}, Now: time.Now}
		for round := 0; round < 20; round++ {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = s.SetRole(ctx, audit.CLI, ids[1-i], models.RoleMember, "")
				}()
			}
			wg.Wait()
			var admins []int64
			d.R.Model(&models.User{}).Where("role = ?", models.RoleAdmin).Pluck("id", &admins)
			refused := 0
			for _, err := range errs {
				if errors.Is(err, admin.ErrLastAdmin) {
					refused++
				} else if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
			}
			if len(admins) != 1 || refused != 1 {
				t.Fatalf("round %d: %d admins left, %d refusals (errors %v)", round, len(admins), refused, errs)
			}
			// Make the demoted one admin again for the next round.
			demoted := ids[0]
			if admins[0] == ids[0] {
				demoted = ids[1]
			}
			if _, err := s.SetRole(ctx, audit.CLI, demoted, models.RoleAdmin, ""); err != nil {
				t.Fatal(err)
			}
		}
	})
}
