package testkit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/peterldowns/pgtestdb"

	"videogen/internal/infra/db"
	"videogen/migrations"
)

// A test's database starts at the newest schema without running the migrations again: applying them to a
// fresh SQLite file costs about a second of CPU under the race detector (the SQL is parsed and executed
// by C translated to Go, every memory access of it instrumented), and the suite starts several hundred
// servers. So the migrations run once into a template, and each test gets a copy of it — the same bytes
// a migration would have left. The template is shared by every test process of the machine (packages
// run as processes of their own), named by a hash of the migrations, so a change to any of them makes a
// new one. Tests of migrating itself take an empty database (EmptySQLiteURL, EmptyPostgresURL).

// migrationsHash names the migrations of one dialect folder: their names and contents.
func migrationsHash(dir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "river %d\n", db.RiverVersion()) // River's own migrations run with ours
	err := fs.WalkDir(migrations.FS, dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash the migrations: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

var sqliteTemplate = sync.OnceValues(makeSQLiteTemplate)

// makeSQLiteTemplate returns the machine's migrated SQLite template, making it if it is not there yet.
// Another process may be making it at the same moment: each migrates a file of its own and renames it
// into place, so the template is always whole, whichever rename comes last.
func makeSQLiteTemplate() (string, error) {
	hash, err := migrationsHash("sqlite")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "videogen-testkit")
	path := filepath.Join(dir, "sqlite-"+hash+".db")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("template folder: %w", err)
	}
	work, err := os.MkdirTemp(dir, "making-")
	if err != nil {
		return "", fmt.Errorf("template folder: %w", err)
	}
	defer os.RemoveAll(work)
	ctx := context.Background()
	d, err := db.Open(ctx, filepath.Join(work, "migrated.db"))
	if err != nil {
		return "", err
	}
	if _, err := d.Migrate(ctx); err != nil {
		_ = d.Close()
		return "", err
	}
	// VACUUM INTO writes one self-contained file (nothing left in a write-ahead log beside it).
	packed := filepath.Join(work, "template.db")
	err = d.W.Exec("VACUUM INTO ?", packed).Error
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("pack the template: %w", err)
	}
	if err := os.Rename(packed, path); err != nil {
		return "", fmt.Errorf("install the template: %w", err)
	}
	return path, nil
}

// SQLiteURL returns the path of a new SQLite database in the test's temporary folder, at the newest
// schema (a copy of the migrated template).
func SQLiteURL(t testing.TB) string {
	t.Helper()
	tmpl, err := sqliteTemplate()
	if err != nil {
		t.Fatalf("SQLite template: %v", err)
	}
	path := EmptySQLiteURL(t)
	if err := copyFile(tmpl, path); err != nil {
		t.Fatalf("copy the SQLite template: %v", err)
	}
	return path
}

// EmptySQLiteURL returns the path of a SQLite database file not yet made, in the test's temporary folder:
// for tests of migrating, restoring and refusing to create a database.
func EmptySQLiteURL(t testing.TB) string {
	return filepath.Join(t.TempDir(), "videogen.db")
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// PostgresURL returns the URL of a new PostgreSQL database at the newest schema, dropped when the test
// ends (kept when it failed, to be looked at). It is a copy of a template database migrated once per
// version of the migrations (CREATE DATABASE … TEMPLATE, by pgtestdb), on the server TEST_DATABASE_URL
// names, connecting as its user: about a tenth of the CPU of migrating a new schema, on both sides.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Fatal("TEST_DATABASE_URL is not set")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("TEST_DATABASE_URL: %v", err)
	}
	password, _ := u.User.Password()
	conf := pgtestdb.Config{
		DriverName: "pgx",
		Host:       u.Hostname(),
		Port:       cmp.Or(u.Port(), "5432"),
		User:       u.User.Username(),
		Password:   password,
		Database:   strings.TrimPrefix(u.Path, "/"),
		Options:    u.RawQuery,
		// The tests' own user, as before the copies: the product needs no more than a database owner, but
		// some tests read the server's state as the administrator does.
		TestRole: &pgtestdb.Role{Username: u.User.Username(), Password: password},
		// A process a test killed may leave a session behind for a moment; the copy goes regardless.
		ForceTerminateConnections: true,
	}
	return pgtestdb.Custom(t, conf, postgresMigrator{}).URL()
}

// postgresMigrator migrates pgtestdb's template with the product's own migrations.
type postgresMigrator struct{}

func (postgresMigrator) Hash() (string, error) { return migrationsHash("postgres") }

func (postgresMigrator) Migrate(ctx context.Context, _ *sql.DB, conf pgtestdb.Config) error {
	d, err := db.Open(ctx, conf.URL())
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Migrate(ctx)
	return err
}
