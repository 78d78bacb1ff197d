package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
)

func restoreCmd() *cobra.Command {
	var from string
	var force, noPrivileges, allowUnsigned bool
	c := &cobra.Command{
		Use:   "restore --from DIR",
		Short: "bring a backup back: SQLite into an empty DATA_DIR, PostgreSQL into an empty DATABASE_URL (docs/backups.md)",
		Long: `Restore brings back a backup made by videogen backup, after checking it against its manifest.

  SQLite      the database file into DATABASE_URL's path (DATA_DIR/videogen.db by default) and the stored
              files, the development secret and the simulator's identity into DATA_DIR. DATA_DIR must
              be empty; --force moves what is there aside into DATA_DIR/replaced-<time>/ first.
  PostgreSQL  pg_restore into DATABASE_URL, which must be an empty database (createdb one), then the
              files into DATA_DIR when the backup has them (files on local disk).

The server must be stopped. First the manifest's signature (manifest.sig) must verify with this
installation's own secret (APP_SECRET; in development DATA_DIR/app_secret when it is there already): a
backup altered since it was made, made under another secret, or made before backups were signed is
refused before anything is touched; --allow-unsigned restores it anyway, with a warning. Every file and
the database are checked against the manifest's SHA-256, the restored row counts against the
manifest's, and then the ledger is audited (as videogen audit).
Exit status 0: restored and the books agree; 1: refused, failed, or the audit found problems.`,
		Example: "  DATA_DIR=/var/lib/videogen videogen restore --from /var/backups/videogen/2026-11-24T0300Z",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			return restore(cmd.Context(), cfg, from, restoreOptions{force: force, noPrivileges: noPrivileges, allowUnsigned: allowUnsigned},
				cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	c.Flags().StringVar(&from, "from", "", "the backup's folder (required)")
	c.Flags().BoolVar(&force, "force", false, "restore into a DATA_DIR that is not empty, moving what the restore replaces aside first")
	c.Flags().BoolVar(&noPrivileges, "no-privileges", false, "PostgreSQL: skip the dump's GRANTs (when the roles they name do not exist on this server)")
	c.Flags().BoolVar(&allowUnsigned, "allow-unsigned", false, "restore a backup whose signature is missing or does not verify with this installation's secret "+
		"(made before backups were signed, or under a secret this installation does not have): only one you know has not been altered")
	_ = c.MarkFlagRequired("from")
	return c
}

type restoreOptions struct {
	force, noPrivileges, allowUnsigned bool
}

// restoreLayout is where each part of a backup goes.
type restoreLayout struct {
	dataDir string
	dbPath  string // the SQLite file; "" for PostgreSQL
	simDir  string
}

// target is where a backup's relative path is restored.
func (l restoreLayout) target(rel string) string {
	if rest, ok := strings.CutPrefix(rel, simPrefix+"/"); ok {
		return filepath.Join(l.simDir, filepath.FromSlash(rest))
	}
	return filepath.Join(l.dataDir, filepath.FromSlash(rel))
}

// replaced is what a restore writes over: the database file and its companions, the secret, the two
// file stores and the simulator's folder. Only these are moved aside by --force; anything else an
// operator keeps in DATA_DIR stays where it is.
func (l restoreLayout) replaced() []string {
	var paths []string
	if l.dbPath != "" {
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			paths = append(paths, l.dbPath+suffix)
		}
	}
	for _, rel := range []string{secretName, outputsDir, "media"} {
		paths = append(paths, filepath.Join(l.dataDir, rel))
	}
	return append(paths, l.simDir)
}

func restore(ctx context.Context, cfg *config.Config, from string, opt restoreOptions, w, warn io.Writer) error {
	start := time.Now()
	m, raw, err := readManifest(from)
	if err != nil {
		return err
	}
	var l restoreLayout
	// Where they really are: the containment checks of makeRoom compare resolved paths.
	if l.dataDir, err = resolvePath(cfg.DataDir); err != nil {
		return fmt.Errorf("DATA_DIR: %w", err)
	}
	if l.simDir, err = resolvePath(cfg.SimDataDir); err != nil {
		return fmt.Errorf("SIM_DATA_DIR: %w", err)
	}
	// The signature before anything else: a backup nobody vouches for touches nothing without
	// --allow-unsigned.
	secrets, where, err := ownSecrets(cfg, l.dataDir)
	if err != nil {
		return err
	}
	if err := verifyManifest(from, raw, m, secrets, where); err != nil {
		var unsigned *errUnsigned
		if !errors.As(err, &unsigned) || !opt.allowUnsigned {
			return err
		}
		fmt.Fprintf(warn, "WARNING: --allow-unsigned: restoring %s although its signature %s: nothing proves it is what videogen backup "+
			"wrote, and whoever could write to it could have changed any row (made a member an owner, credited a balance, replaced "+
			"a password hash or an API key) or any stored file; restore only a backup you know has not been altered\n", from, unsigned.what)
	}
	latest, err := latestSchemaVersion(m.Engine == enginePostgres)
	if err != nil {
		return err
	}
	if m.SchemaVersion > latest {
		return fmt.Errorf("the backup's schema is version %d, newer than this binary's %d: restore it with the videogen that made it (%s) or a newer one",
			m.SchemaVersion, latest, m.Videogen)
	}
	switch {
	case m.Engine == engineSQLite && cfg.IsPostgres():
		return fmt.Errorf("this is a SQLite backup and DATABASE_URL names PostgreSQL: restore it into a SQLite DATA_DIR, "+
			"then copy that to PostgreSQL with %s (docs/backups.md)", hint("migrate-to-postgres", "--to", "<url>"))
	case m.Engine == enginePostgres && !cfg.IsPostgres():
		return errors.New("this is a PostgreSQL backup: set DATABASE_URL to a new, empty PostgreSQL database (createdb) and run again")
	}
	if m.Engine == engineSQLite {
		// The file's folder resolved, the file's own name kept: a link there is replaced, as it always was.
		dbPath := db.SQLitePath(cfg.DatabaseURL)
		dbDir, err := resolvePath(filepath.Dir(dbPath))
		if err != nil {
			return fmt.Errorf("the database's folder: %w", err)
		}
		l.dbPath = filepath.Join(dbDir, filepath.Base(dbPath))
		if err := restoreSQLite(ctx, from, m, l, opt, w); err != nil {
			return err
		}
	} else if err := restorePostgres(ctx, cfg.DatabaseURL, from, m, l, opt, w); err != nil {
		return err
	}
	fmt.Fprintf(w, "restored %s schema %d from %s (taken %s) in %.1fs: %d tables, %d accounts, %d tasks, %d ledger entries, %d files (%d bytes)\n",
		m.Engine, m.SchemaVersion, from, m.StartedAt.Format(time.RFC3339), time.Since(start).Seconds(), len(m.Tables),
		m.Tables["accounts"], m.Tables["tasks"], m.Tables["ledger_entries"], len(m.Files), m.FilesBytes)
	for _, f := range m.Missing {
		fmt.Fprintf(w, "  not in the backup: %s (%s)\n", f.Path, f.Why)
	}
	return verifyRestored(ctx, cfg.DatabaseURL, m, latest, w)
}

func restoreSQLite(ctx context.Context, from string, m *manifest, l restoreLayout, opt restoreOptions, w io.Writer) error {
	// Files swapped under a running server would be overwritten by its next checkpoint, or serve a mix.
	if busy, err := sqliteInUse(l.dbPath); err != nil {
		return err
	} else if busy {
		return fmt.Errorf("%s is open in another process: stop videogen serve (and any other videogen command) before restoring", l.dbPath)
	}
	if err := makeRoom(l, opt.force, true, w); err != nil {
		return err
	}
	dirs := map[string]bool{}
	if err := restoreFiles(ctx, from, m, l, dirs); err != nil {
		return err
	}
	// The database last: a database is never in place without the files it names.
	if _, _, err := copyFile(filepath.Join(from, m.Database.Path), l.dbPath, m.Database.SHA256, dirs); err != nil {
		return fmt.Errorf("restore the database: %w", err)
	}
	return syncDirs(dirs)
}

func restorePostgres(ctx context.Context, rawURL, from string, m *manifest, l restoreLayout, opt restoreOptions, w io.Writer) error {
	target, err := newPGTarget(rawURL)
	if err != nil {
		return err
	}
	if _, err := pgTool("pg_restore"); err != nil {
		return err
	}
	pool, err := sql.Open("pgx", rawURL)
	if err != nil {
		return fmt.Errorf("open %s: %w", target.shown, err)
	}
	defer pool.Close()
	var tables int
	if err := pool.QueryRowContext(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables); err != nil {
		return fmt.Errorf("connect to %s: %w", target.shown, err)
	}
	if tables > 0 {
		return fmt.Errorf("%s already has %d tables: pg_restore into a new, empty database (createdb); --force does not apply to a database", target.shown, tables)
	}
	// pg_restore reads the dump from a private copy, hashed as it is made: checking the backup's file and
	// then handing pg_restore its path would let whoever can write the backup's folder swap the file in
	// between, and restore a dump the signature never covered. (It takes the dump's size again on disk,
	// for the length of the restore.)
	private, err := os.MkdirTemp("", "videogen-restore-")
	if err != nil {
		return fmt.Errorf("make a private folder for the dump: %w", err)
	}
	defer os.RemoveAll(private)
	dump := filepath.Join(private, filepath.Base(m.Database.Path))
	if _, _, err := copyFile(filepath.Join(from, m.Database.Path), dump, m.Database.SHA256, map[string]bool{}); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(from, m.Database.Path), err)
	}
	withFiles := len(m.Files) > 0
	if withFiles {
		if err := makeRoom(l, opt.force, false, w); err != nil {
			return err
		}
	}
	// --no-owner: the restoring role owns what it creates, as after videogen migrate. --single-transaction:
	// a failed restore leaves the database empty, ready for another try.
	args := []string{"--no-owner", "--exit-on-error", "--single-transaction", "--no-password", "--dbname=" + target.url}
	if opt.noPrivileges {
		args = append(args, "--no-privileges")
	}
	if err := runPGTool(ctx, target, "pg_restore", append(args, dump)...); err != nil {
		return err
	}
	// The migration revoked these from the role that ran it; with --no-owner the restoring role owns the
	// audit log now, and gets the same treatment (docs/support.md).
	if _, err := pool.ExecContext(ctx, "REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM CURRENT_USER"); err != nil {
		return fmt.Errorf("restored, but the audit log's privileges were not narrowed: %w", err)
	}
	if !withFiles {
		return nil
	}
	dirs := map[string]bool{}
	if err := restoreFiles(ctx, from, m, l, dirs); err != nil {
		return err
	}
	return syncDirs(dirs)
}

// makeRoom refuses a DATA_DIR (or SQLite file) that holds anything, unless force: then what the restore
// replaces is moved aside, into DATA_DIR/replaced-<time>/ (or beside the file when it lives outside
// DATA_DIR), never deleted — a restore run against the wrong folder can be undone.
func makeRoom(l restoreLayout, force, sqlite bool, w io.Writer) error {
	var present []string
	names, err := dirEntries(l.dataDir)
	if err != nil {
		return err
	}
	for _, n := range names {
		present = append(present, filepath.Join(l.dataDir, n))
	}
	for _, p := range l.replaced() {
		if within(p, l.dataDir) {
			continue // counted above
		}
		if _, err := os.Lstat(p); err == nil {
			present = append(present, p)
		}
	}
	if len(present) == 0 {
		return nil
	}
	if !force {
		what := "DATA_DIR " + l.dataDir
		if sqlite && !within(l.dbPath, l.dataDir) {
			what += " or the database file " + l.dbPath
		}
		return fmt.Errorf("%s is not empty (%s): restore into an empty folder, or add --force to move what the restore replaces aside",
			what, listSome(shortNames(present, l.dataDir)))
	}
	stamp := time.Now().UTC().Format("20060102T150405Z")
	aside := filepath.Join(l.dataDir, "replaced-"+stamp)
	var moved []string
	for _, p := range l.replaced() {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		dst := p + ".replaced-" + stamp
		if within(p, l.dataDir) {
			rel, _ := filepath.Rel(l.dataDir, p)
			dst = filepath.Join(aside, rel)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return fmt.Errorf("--force: %w", err)
		}
		if err := os.Rename(p, dst); err != nil {
			return fmt.Errorf("--force: move %s aside: %w", p, err)
		}
		moved = append(moved, dst)
	}
	sort.Strings(moved)
	if len(moved) > 0 {
		fmt.Fprintf(w, "--force: moved aside what the restore replaces (delete it once the restore is checked):\n  %s\n", strings.Join(moved, "\n  "))
	}
	return nil
}

// shortNames shows paths inside dataDir by their name there.
func shortNames(paths []string, dataDir string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		if rel, err := filepath.Rel(dataDir, p); err == nil && within(p, dataDir) {
			out[i] = rel
		} else {
			out[i] = p
		}
	}
	return out
}

// restoreFiles copies every file of the backup into place, each checked against its digest.
func restoreFiles(ctx context.Context, from string, m *manifest, l restoreLayout, dirs map[string]bool) error {
	for _, f := range m.Files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, _, err := copyFile(filepath.Join(from, filepath.FromSlash(f.Path)), l.target(f.Path), f.SHA256, dirs); err != nil {
			return fmt.Errorf("restore %s: %w", f.Path, err)
		}
	}
	return nil
}

// verifyRestored opens what was restored and holds it to the manifest: the schema version and every
// table's row count, then audits the ledger as videogen audit does.
func verifyRestored(ctx context.Context, dbURL string, m *manifest, latest int64, w io.Writer) error {
	d, err := db.Open(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("open the restored database: %w", err)
	}
	defer d.Close()
	sqlDB, err := d.R.DB()
	if err != nil {
		return err
	}
	version, err := schemaVersion(ctx, sqlDB)
	if err != nil {
		return err
	}
	if version != m.SchemaVersion {
		return fmt.Errorf("the restored schema is version %d, the manifest says %d", version, m.SchemaVersion)
	}
	tables, err := listTables(ctx, sqlDB, d.Postgres)
	if err != nil {
		return err
	}
	counts, err := countRows(ctx, sqlDB, tables)
	if err != nil {
		return err
	}
	var differ []string
	for t, want := range m.Tables {
		if got, ok := counts[t]; !ok || got != want {
			differ = append(differ, fmt.Sprintf("%s has %d rows, the manifest %d", t, got, want))
		}
	}
	for t := range counts {
		if _, ok := m.Tables[t]; !ok {
			differ = append(differ, fmt.Sprintf("%s is not in the manifest", t))
		}
	}
	if len(differ) > 0 {
		sort.Strings(differ)
		return fmt.Errorf("the restored database differs from the manifest: %s", strings.Join(differ, "; "))
	}
	fmt.Fprintf(w, "every table's row count matches the manifest (%d tables)\n", len(counts))
	if version < latest {
		fmt.Fprintf(w, "the schema is version %d, this binary's %d: %s (or serve) applies the rest; then run %s\n", version, latest, hint("migrate"), hint("audit"))
		return nil
	}
	problems, err := tasks.Audit(ctx, d)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("restored, but the audit found %d problems: every balance must equal its ledger entries, every task its billing state", len(problems))
	}
	fmt.Fprintln(w, "ledger and task counters agree")
	return nil
}
