package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/pressly/goose/v3/lock"
	"golang.org/x/sys/unix"
)

// ErrMigrationLocked is Migrate's answer when another process held the migration lock for longer than
// it waits (migrationLockWait).
var ErrMigrationLocked = errors.New("another process holds the migration lock")

// migrationLockWait bounds how long Migrate waits for another process's migration: generous, since a
// migration of a large database can take a while, but bounded, so a process stuck holding the lock
// shows as an error that says so rather than as a start that never ends.
const migrationLockWait = 60 * time.Second

// migrationLockPoll is how often a waiting process asks for the lock again.
const migrationLockPoll = 100 * time.Millisecond

// migrationLockID is the PostgreSQL advisory lock migrating takes: goose's own (lock.DefaultLockID), so
// a binary of an earlier version, which migrated under goose's session locker, and this one exclude each
// other. Advisory locks are per database, so instances on other schemas of the same database wait for
// each other too: harmless, a migration that finds nothing to do takes milliseconds.
const migrationLockID = lock.DefaultLockID

// MigrationLockFile is the file beside a SQLite database that migrating locks (flock): the first process
// to migrate a new database creates it, and it stays, empty, since removing it would let a third process
// lock a new file while a second still holds the old one. The kernel releases the lock when the process
// holding it exits, however it exits.
func MigrationLockFile(sqlitePath string) string { return sqlitePath + ".migrate.lock" }

// lockMigrations takes the migration lock — on PostgreSQL a session advisory lock on a connection of its
// own, on SQLite an exclusive flock on MigrationLockFile — waiting for another process that holds it
// for up to migrationLockWait. The returned function releases it.
func (d *DB) lockMigrations(ctx context.Context) (unlock func(), err error) {
	if d.Postgres {
		return d.lockMigrationsPostgres(ctx)
	}
	return d.lockMigrationsSQLite(ctx)
}

// lockWait is how long this handle waits for the migration lock: migrationLockWait unless a test
// shortened it.
func (d *DB) lockWait() time.Duration {
	if d.migrationLockWait > 0 {
		return d.migrationLockWait
	}
	return migrationLockWait
}

// waitForLock calls try until it takes the lock, fails, the context ends or wait passes.
func waitForLock(ctx context.Context, wait time.Duration, where string, try func() (bool, error)) error {
	deadline := time.Now().Add(wait)
	for {
		ok, err := try()
		if err != nil {
			return fmt.Errorf("take the migration lock (%s): %w", where, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w (%s) and has not released it in %s: it is still migrating this database, or is stuck; "+
				"run again once it has finished", ErrMigrationLocked, where, wait)
		}
		t := time.NewTimer(migrationLockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for the migration lock (%s): %w", where, ctx.Err())
		case <-t.C:
		}
	}
}

func (d *DB) lockMigrationsSQLite(ctx context.Context) (func(), error) {
	path := MigrationLockFile(d.path)
	// Open already made the database's folder, so a new DATA_DIR has it by now.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the migration lock: %w", err)
	}
	err = waitForLock(ctx, d.lockWait(), path, func() (bool, error) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	// Closing the file releases the lock.
	return func() { _ = f.Close() }, nil
}

func (d *DB) lockMigrationsPostgres(ctx context.Context) (func(), error) {
	// A connection of its own: a session lock belongs to the connection that took it, and goose takes
	// connections from the pool as it likes.
	conn, err := d.rsql.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect for the migration lock: %w", err)
	}
	err = waitForLock(ctx, d.lockWait(), fmt.Sprintf("PostgreSQL advisory lock %d", migrationLockID), func() (bool, error) {
		var ok bool
		err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockID).Scan(&ok)
		return ok, err
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return func() {
		// Unlock even when the migration's context has ended. If the unlock fails, the connection must not
		// go back to the pool still holding the lock: ErrBadConn makes database/sql close it, and PostgreSQL
		// releases a session's locks when the session ends.
		var released bool
		if err := conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockID).Scan(&released); err != nil || !released {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = conn.Close()
	}, nil
}
