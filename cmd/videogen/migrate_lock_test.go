package main_test

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
)

// TestMigrateConcurrently: five processes migrating one new database at once — three `videogen migrate`
// and two `videogen accounts create`, the first commands of a new installation, on a DATA_DIR that does
// not exist yet or a new PostgreSQL schema — all succeed: one migrates, the others wait for the migration
// lock and find nothing to do (docs/operations.md, "Migrations"). The schema is whole: every migration
// recorded once, and the same tables, columns and indexes as a database migrated alone.
//
// The processes start behind a barrier (each a shell blocked reading its stdin, then exec'ing videogen),
// so they reach the database together rather than one process start apart.
func TestMigrateConcurrently(t *testing.T) {
	testkit.EachEmptyDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATA_DIR": filepath.Join(dir, "new", "data")}
		if strings.HasPrefix(dbURL, "postgres") {
			env["DATABASE_URL"] = dbURL
		}
		commands := [][]string{
			{"migrate"},
			{"accounts", "create", "--email", "ada@example.com", "--password", "correct horse battery"},
			{"migrate"},
			{"accounts", "create", "--email", "grace@example.com", "--password", "correct horse battery"},
			{"migrate"},
		}
		type proc struct {
			cmd      *exec.Cmd
			gate     io.WriteCloser
			out, err bytes.Buffer
		}
		procs := make([]*proc, len(commands))
		for i, args := range commands {
			p := &proc{cmd: exec.Command("sh", append([]string{"-c", `read -r _; exec "$0" "$@"`, bin}, args...)...)}
			p.cmd.Dir, p.cmd.Env = dir, environ(env)
			p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
			var err error
			if p.gate, err = p.cmd.StdinPipe(); err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs[i] = p
		}
		for _, p := range procs {
			_ = p.gate.Close() // the barrier opens: read returns at end of input
		}
		applied := regexp.MustCompile(`applied (\d+) migration\(s\)`)
		var counts []int
		for i, p := range procs {
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("videogen %s: %v\nstdout: %s\nstderr: %s", strings.Join(commands[i], " "), err, p.out.String(), p.err.String())
				continue
			}
			if commands[i][0] == "migrate" {
				m := applied.FindStringSubmatch(p.out.String())
				if m == nil {
					t.Errorf("videogen migrate said %q", p.out.String())
					continue
				}
				n, _ := strconv.Atoi(m[1])
				counts = append(counts, n)
			}
		}
		if t.Failed() {
			return
		}

		url := env["DATABASE_URL"]
		if url == "" {
			url = filepath.Join(env["DATA_DIR"], "videogen.db")
		}
		got := openDatabase(t, url, false)
		alone := testkit.EmptySQLiteURL(t)
		if strings.HasPrefix(dbURL, "postgres") {
			alone = testkit.EmptyPostgresURL(t)
		}
		want := openDatabase(t, alone, true)
		gotVersions, wantVersions := schemaVersions(t, got), schemaVersions(t, want)
		if !slices.Equal(gotVersions, wantVersions) {
			t.Errorf("goose_db_version holds %v, want each migration once: %v", gotVersions, wantVersions)
		}
		latest := len(wantVersions) - 1 + db.RiverVersion() // version 0 is goose's own row; River's migrations run with ours
		for _, n := range counts {
			if n != 0 && n != latest {
				t.Errorf("a migrate applied %d migration(s) (of %v): a run must apply all %d or none", n, counts, latest)
			}
		}
		if g, w := schemaObjects(t, got), schemaObjects(t, want); !slices.Equal(g, w) {
			t.Errorf("the schema differs from one migrated alone:\n got %d objects: %v\nwant %d objects: %v", len(g), g, len(w), w)
		}
		var users int64
		if err := got.R.Raw("SELECT COUNT(*) FROM users WHERE email IN ('ada@example.com', 'grace@example.com')").Scan(&users).Error; err != nil || users != 2 {
			t.Errorf("users created: %d, %v; want 2", users, err)
		}
	})
}

// openDatabase opens the database at url, migrating it when migrate is set (the database migrated alone);
// the one the processes migrated is read as they left it.
func openDatabase(t *testing.T, url string, migrate bool) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if migrate {
		if _, err := d.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// schemaVersions lists goose's record of applied migrations, with repeats.
func schemaVersions(t *testing.T, d *db.DB) []int64 {
	t.Helper()
	var v []int64
	if err := d.R.Raw("SELECT version_id FROM goose_db_version ORDER BY version_id").Scan(&v).Error; err != nil {
		t.Fatal(err)
	}
	return v
}

// schemaObjects lists the schema's tables with their columns, and its indexes, sorted.
func schemaObjects(t *testing.T, d *db.DB) []string {
	t.Helper()
	q := `SELECT 'column ' || m.name || '.' || c.name FROM sqlite_master m JOIN pragma_table_info(m.name) c WHERE m.type = 'table'
		UNION ALL SELECT m.type || ' ' || m.name FROM sqlite_master m WHERE m.type IN ('index', 'trigger', 'view')`
	if d.Postgres {
		q = `SELECT 'column ' || table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()
			UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = current_schema()
			UNION ALL SELECT 'trigger ' || trigger_name || ' ' || event_manipulation FROM information_schema.triggers WHERE trigger_schema = current_schema()`
	}
	var objects []string
	if err := d.R.Raw(q).Scan(&objects).Error; err != nil {
		t.Fatal(err)
	}
	if len(objects) < 50 {
		t.Fatalf("only %d schema objects read: %v", len(objects), objects)
	}
	slices.Sort(objects)
	return objects
}
