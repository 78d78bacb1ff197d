// Package db opens videogen's database (PostgreSQL, or SQLite as the embedded default), applies the
// embedded migrations and runs write transactions the way each engine needs.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	gosqlite "github.com/glebarez/go-sqlite"
	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"videogen/migrations"
)

// DB is the database. On SQLite, W is a pool of one connection that every write goes through (SQLite has
// a single writer; queueing writers in Go instead of in SQLite's busy loop means SQLITE_BUSY never
// reaches a request), and R is a pool of readers that WAL lets run beside it. On PostgreSQL both are the
// same pool.
type DB struct {
	W, R     *gorm.DB
	Postgres bool
	rsql     *sql.DB // R's pool, for QueryRow
	path     string  // the SQLite file; "" on PostgreSQL
	// migrationLockWait, when set, replaces the package's bound on waiting for the migration lock (tests).
	migrationLockWait time.Duration
}

// Now is the clock for timestamps the database stores: UTC, microseconds (PostgreSQL's precision), so a
// time read back equals the time written.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Open connects to url: a postgres:// URL or a SQLite file path. It does not migrate.
func Open(ctx context.Context, url string) (*DB, error) {
	// GORM's PrepareStmt is off for writes and for PostgreSQL: a statement it prepares inside a
	// transaction belongs to that transaction and is re-prepared by every later one (an extra round trip
	// each), and pgx already keeps prepared statements per connection. SQLite's readers keep it: their
	// queries run outside transactions, so each is parsed once per connection.
	gcfg := &gorm.Config{
		Logger:                 logger.Discard,
		NowFunc:                Now,
		SkipDefaultTransaction: true, // every multi-statement write makes its own transaction explicitly
		TranslateError:         true,
	}
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		pcfg, err := pgx.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		pcfg.DialFunc = dialPostgres(pcfg.ConnectTimeout)
		g, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*pcfg)}), gcfg)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		sqlDB, _ := g.DB()
		sqlDB.SetMaxOpenConns(40)
		sqlDB.SetMaxIdleConns(40)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		if err := sqlDB.PingContext(ctx); err != nil {
			return nil, fmt.Errorf("connect to postgres: %w", err)
		}
		if err := countStatements(g); err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		return &DB{W: g, R: g, Postgres: true, rsql: sqlDB}, nil
	}

	path := SQLitePath(url)
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create database folder: %w", err)
		}
	}
	// FULL keeps a committed ledger entry across a power cut, not only a process crash. No _time_format:
	// the driver (glebarez/go-sqlite v1.21) stops reading parameters after it, which would silently drop
	// _txlock=immediate; its default time format is the same one anyway.
	common := "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)"
	w, err := openSQLite(path, "_pragma=journal_mode(WAL)&_txlock=immediate&"+common, gcfg)
	if err != nil {
		return nil, err
	}
	wsql, _ := w.DB()
	wsql.SetMaxOpenConns(1)
	wsql.SetMaxIdleConns(1)
	wsql.SetConnMaxLifetime(0)
	rcfg := *gcfg
	rcfg.PrepareStmt = true
	r, err := openSQLite(path, "_pragma=query_only(1)&"+common, &rcfg)
	if err != nil {
		return nil, err
	}
	rsql, _ := r.DB()
	rsql.SetMaxOpenConns(8)
	rsql.SetMaxIdleConns(8)
	for _, g := range []*gorm.DB{w, r} {
		if err := countStatements(g); err != nil {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
	}
	return &DB{W: w, R: r, rsql: rsql, path: path}, nil
}

// SQLitePath is the file a SQLite DATABASE_URL names ("data/videogen.db", "sqlite://…", "file:…").
func SQLitePath(databaseURL string) string {
	return strings.TrimPrefix(strings.TrimPrefix(databaseURL, "sqlite://"), "file:")
}

// SQLiteDSN is the database/sql data source of the SQLite file at path with the driver's params
// ("_pragma=…&mode=ro"): the form every opening of the file uses, Open's and the backup's alike.
func SQLiteDSN(path, params string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + params
}

// openBusyWait bounds how long opening a SQLite file waits for another process's lock on it, as the
// busy timeout bounds a statement's wait.
const openBusyWait = 10 * time.Second

// openSQLite opens the file, waiting while another process holds it locked. The connection's pragmas
// can meet a lock the busy timeout does not wait for: the first to switch a new file to WAL needs it
// exclusively, and SQLite answers SQLITE_BUSY at once rather than wait where waiting could deadlock —
// processes starting together on a new DATA_DIR (a server and a command) would otherwise fail to start.
func openSQLite(path, params string, gcfg *gorm.Config) (*gorm.DB, error) {
	deadline := time.Now().Add(openBusyWait)
	for {
		g, err := gorm.Open(sqlite.Open(SQLiteDSN(path, params)), gcfg)
		if g != nil {
			if sqlDB, dbErr := g.DB(); dbErr == nil {
				if err == nil {
					err = sqlDB.Ping()
				}
				if err == nil {
					return g, nil
				}
				_ = sqlDB.Close()
			}
		}
		var se *gosqlite.Error
		if !errors.As(err, &se) || se.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			return nil, fmt.Errorf("open sqlite %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sqliteBusy is SQLITE_BUSY, the primary result code of a lock held by another connection.
const sqliteBusy = 5

// Close closes both pools.
func (d *DB) Close() error {
	var errs []error
	for _, g := range []*gorm.DB{d.W, d.R} {
		if s, err := g.DB(); err == nil {
			errs = append(errs, s.Close())
		}
		if d.Postgres {
			break
		}
	}
	return errors.Join(errs...)
}

// Tx runs fn in a write transaction. On SQLite it is BEGIN IMMEDIATE on the single writer connection, so
// two transactions never deadlock on a read-to-write upgrade.
func (d *DB) Tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return d.W.WithContext(ctx).Transaction(fn)
}

func (d *DB) provider() (*goose.Provider, error) {
	dialect, dir := goose.DialectSQLite3, "sqlite"
	if d.Postgres {
		dialect, dir = goose.DialectPostgres, "postgres"
	}
	sub, err := fs.Sub(migrations.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	sqlDB, err := d.W.DB()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(dialect, sqlDB, sub)
}

// Migrate applies every pending migration and returns how many ran. Several processes may migrate one
// database at once — instances starting together, the server and a command (every command that opens
// the database migrates it) — so the whole run, from reading the applied versions to the last migration,
// holds the migration lock (lockMigrations): the others wait, then find nothing to do. Without it two
// processes read the same pending list and the second fails on a table the first has just made.
func (d *DB) Migrate(ctx context.Context) (int, error) {
	p, err := d.provider()
	if err != nil {
		return 0, err
	}
	unlock, err := d.lockMigrations(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n, err := d.migrateRiver(ctx)
	if err != nil {
		return n, err
	}
	res, err := p.Up(ctx)
	if err != nil {
		return n + len(res), fmt.Errorf("apply migrations: %w", err)
	}
	return n + len(res), nil
}

// MigrateTo applies the migrations up to and including version (and all of River's): a test of a
// migration starts from the schema before it.
func (d *DB) MigrateTo(ctx context.Context, version int64) error {
	p, err := d.provider()
	if err != nil {
		return err
	}
	unlock, err := d.lockMigrations(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := d.migrateRiver(ctx); err != nil {
		return err
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		return fmt.Errorf("apply migrations up to %d: %w", version, err)
	}
	return nil
}

// ErrMigrationsPending is returned by Ready when the schema is older than the binary.
var ErrMigrationsPending = errors.New("migrations pending: run 'videogen migrate'")

// Ready reports whether the database answers and its schema is at the newest embedded migration.
func (d *DB) Ready(ctx context.Context) error {
	sqlDB, err := d.R.DB()
	if err != nil {
		return err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	p, err := d.provider()
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("read migration state: %w", err)
	}
	if !pending {
		if pending, err = d.riverPending(ctx); err != nil {
			return err
		}
	}
	if pending {
		return ErrMigrationsPending
	}
	return nil
}

// WSQL returns the writing pool's *sql.DB, for the few hot paths that skip GORM's reflection.
func (d *DB) WSQL() *sql.DB {
	s, _ := d.W.DB()
	return s
}

// IsUniqueViolation reports whether err is a unique-constraint failure on either engine.
func IsUniqueViolation(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505")
}

// Slice is the SQL expression numbering the slice of `seconds` (since the Unix epoch) a time column falls
// in, on either engine: a report groups by it in SQL and gives each slice its day in a time zone in Go,
// which neither engine's SQL knows by name on both. With slices of 15 minutes no slice straddles a local
// midnight, every zone's offset being a multiple of them.
func (d *DB) Slice(column string, seconds int) string {
	if d.Postgres {
		return fmt.Sprintf("CAST(FLOOR(EXTRACT(EPOCH FROM %s) / %d) AS BIGINT)", column, seconds)
	}
	return fmt.Sprintf("(CAST(strftime('%%s', %s) AS INTEGER) / %d)", column, seconds)
}

// UTCDay is the SQL expression for the UTC day (YYYY-MM-DD) of a time column: per-day reports group
// by it on either engine.
func (d *DB) UTCDay(column string) string {
	if d.Postgres {
		return "to_char(" + column + " AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	}
	return "date(" + column + ")"
}
