package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
)

// TestMigrateWaitsForTheLockThenGivesUp: while another holder has the migration lock, Migrate waits for
// it — bounded: past the wait it fails saying another process holds the lock — and applies nothing; once
// the lock is released it migrates. (cmd/videogen's TestMigrateConcurrently runs five real processes on
// one new database; this is the bound, with the wait shortened.)
func TestMigrateWaitsForTheLockThenGivesUp(t *testing.T) {
	testkit.EachEmptyDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		holder, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		unlock, err := holder.LockMigrations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if unlock != nil {
				unlock()
			}
		}()

		d, err := db.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		d.SetMigrationLockWait(300 * time.Millisecond)
		n, err := d.Migrate(ctx)
		if !errors.Is(err, db.ErrMigrationLocked) || !strings.Contains(err.Error(), "another process holds the migration lock") || n != 0 {
			t.Fatalf("migrate while another holds the lock: %d, %v; want ErrMigrationLocked", n, err)
		}
		if err := d.Ready(ctx); !errors.Is(err, db.ErrMigrationsPending) {
			t.Fatalf("ready after the refused migration: %v, want migrations pending (nothing applied)", err)
		}

		unlock()
		unlock = nil
		// The lock is one per PostgreSQL database: another package's test may be migrating a schema of its
		// own right now, so this migration waits as any would (the default bound), not 300 ms.
		d.SetMigrationLockWait(0)
		if n, err := d.Migrate(ctx); err != nil || n == 0 {
			t.Fatalf("migrate once the lock is released: %d, %v", n, err)
		}
		if err := d.Ready(ctx); err != nil {
			t.Fatalf("ready: %v", err)
		}
	})
}
