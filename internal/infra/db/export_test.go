package db

import (
	"context"
	"time"
)

// SetMigrationLockWait shortens how long Migrate on d waits for the migration lock.
func (d *DB) SetMigrationLockWait(wait time.Duration) { d.migrationLockWait = wait }

// LockMigrations takes the migration lock as Migrate does, as another process would hold it.
func (d *DB) LockMigrations(ctx context.Context) (unlock func(), err error) {
	return d.lockMigrations(ctx)
}
