package db

import (
	"context"
	"testing"
	"time"
)

// SetMigrationLockWait shortens how long Migrate waits for the migration lock, for the test's duration.
func SetMigrationLockWait(t *testing.T, wait time.Duration) {
	old := migrationLockWait
	migrationLockWait = wait
	t.Cleanup(func() { migrationLockWait = old })
}

// LockMigrations takes the migration lock as Migrate does, as another process would hold it.
func (d *DB) LockMigrations(ctx context.Context) (unlock func(), err error) {
	return d.lockMigrations(ctx)
}
