package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	_ "github.com/glebarez/go-sqlite"  // database/sql driver "sqlite": the snapshot is read without GORM
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx": the transaction pg_dump shares
	"github.com/spf13/cobra"

	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
)

// A backup is a folder: the database (a SQLite file or a pg_dump archive), the stored files its rows
// name laid out as under DATA_DIR, the development secret and the simulator's identity when they live
// in DATA_DIR, manifest.sig (the manifest's signature, signature.go) and manifest.json, written last: a
// folder without it is not a finished backup. The folder and all in it are private to the owner.
const (
	manifestName   = "manifest.json"
	manifestFormat = 1
	sqliteCopyName = "videogen.db"
	pgDumpName     = "videogen.dump"
	secretName     = "app_secret" // config.EnsureSecret's file
	simPrefix      = "sim"        // SIM_DATA_DIR, wherever it is, goes to sim/ in the backup
	engineSQLite   = "sqlite"
	enginePostgres = "postgres"
)

// manifest describes a backup: what it holds, how much of each table, and digests to check it by.
type manifest struct {
	Format        int              `json:"format"`
	Engine        string           `json:"engine"`
	StartedAt     time.Time        `json:"started_at"`  // the snapshot is of an instant during the database copy,
	FinishedAt    time.Time        `json:"finished_at"` // which starts after started_at
	Videogen      string           `json:"videogen"`    // the binary that made it
	SchemaVersion int64            `json:"schema_version"`
	Database      backupFile       `json:"database"`
	Tables        map[string]int64 `json:"tables"` // rows per table in the snapshot
	Storage       string           `json:"storage"`
	StorageNote   string           `json:"storage_note,omitempty"`
	Files         []backupFile     `json:"files"`
	FilesBytes    int64            `json:"files_bytes"`
	Missing       []missingFile    `json:"missing,omitempty"`
	AppSecret     string           `json:"app_secret"`
}

type backupFile struct {
	Path   string `json:"path"` // relative to the backup and to DATA_DIR (sim/… to SIM_DATA_DIR)
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// missingFile is a file the snapshot names that was gone when the files were copied.
type missingFile struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

func backupCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "backup --out DIR",
		Short: "copy the database and the stored files into DIR while the server runs (docs/backups.md)",
		Long: `Backup takes a consistent copy of a running installation into DIR, a new or empty folder:

  SQLite      VACUUM INTO DIR/videogen.db: one read transaction, so one instant, while writes go on
  PostgreSQL  pg_dump --format=custom into DIR/videogen.dump (pg_dump must be on PATH)

then, with files on local disk, every stored file the snapshot's rows name (videos, their stills,
uploaded media) into DIR/blobs and DIR/media, and the development secret (DATA_DIR/app_secret) and the
simulator's identity when they are there. With S3_ENDPOINT the files stay in the bucket: keep bucket
versioning on. DIR/manifest.json, written last, lists it all with row counts and SHA-256 digests;
DIR/manifest.sig signs it with a key derived from APP_SECRET (in development DATA_DIR/app_secret). DIR
is made 0700, its files 0600.

Restore with videogen restore --from DIR.`,
		Example: "  videogen backup --out /var/backups/videogen/$(date -u +%Y-%m-%dT%H%MZ)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			// Interrupted (Ctrl-C, systemd stopping the unit), it stops and removes what it wrote.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			m, err := backup(ctx, cfg, out)
			if err != nil {
				return err
			}
			printBackup(cmd.OutOrStdout(), out, m)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "a new or empty folder for the backup, outside DATA_DIR (required)")
	_ = c.MarkFlagRequired("out")
	return c
}

// backup writes a backup of cfg's installation into out. On failure it removes what it wrote, so a
// folder with a manifest is always a whole backup and a retry finds the folder empty.
func backup(ctx context.Context, cfg *config.Config, out string) (m *manifest, err error) {
	start := time.Now()
	// Judged, and written, where they really are: a symbolic link on the way decides nothing.
	if out, err = resolvePath(out); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	dataDir, err := resolvePath(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("DATA_DIR: %w", err)
	}
	if within(out, dataDir) {
		return nil, fmt.Errorf("--out %s is inside DATA_DIR %s: a backup there is lost with what it backs up", out, dataDir)
	}
	// The simulator's folder is copied whole: a backup inside it would copy itself.
	if simDir, err := resolvePath(cfg.SimDataDir); err != nil {
		return nil, fmt.Errorf("SIM_DATA_DIR: %w", err)
	} else if within(out, simDir) {
		return nil, fmt.Errorf("--out %s is inside SIM_DATA_DIR %s, which the backup copies: give a folder outside it", out, simDir)
	}
	// A backup never overwrites another: the folder must be new or empty.
	if names, err := dirEntries(out); err != nil {
		return nil, err
	} else if len(names) > 0 {
		return nil, fmt.Errorf("--out %s is not empty (%s): give a new folder; a backup never overwrites another", out, listSome(names))
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", out, err)
	}
	// A folder that was there keeps its mode through MkdirAll: an empty one made 0777 would leave the
	// database copy, password hashes and the secret listable, and replaceable, by anyone.
	if err := os.Chmod(out, 0o700); err != nil {
		return nil, fmt.Errorf("make %s private: %w", out, err)
	}
	// Looked at again now that only we can write there: another user could have planted an entry (a
	// symbolic link where the database copy goes) between the first look and the change of mode.
	if names, err := dirEntries(out); err != nil {
		return nil, err
	} else if len(names) > 0 {
		return nil, fmt.Errorf("--out %s changed while it was made private (%s): someone else can write there; give a new folder", out, listSome(names))
	}
	defer func() {
		if err != nil {
			names, _ := dirEntries(out)
			for _, n := range names {
				_ = os.RemoveAll(filepath.Join(out, n))
			}
		}
	}()

	m = &manifest{Format: manifestFormat, StartedAt: start.UTC(), Videogen: binaryVersion(), Files: []backupFile{}}
	dirs := map[string]bool{out: true}
	// The database first, then the files: a file is written and synced before the commit that names it
	// (the worker stores a video, then completes its task; an upload is stored before its row is ready),
	// so every file the snapshot names exists by the time it is copied — unless its retention ended or
	// its owner deleted it in between, which the manifest lists under "missing".
	var named []storedFile
	if cfg.IsPostgres() {
		m.Engine = enginePostgres
		named, err = snapshotPostgres(ctx, cfg.DatabaseURL, out, m)
	} else {
		m.Engine = engineSQLite
		named, err = snapshotSQLite(ctx, db.SQLitePath(cfg.DatabaseURL), out, m)
	}
	if err != nil {
		return nil, err
	}

	if cfg.S3Endpoint != "" {
		m.Storage = "s3"
		m.StorageNote = fmt.Sprintf("the %d stored files the snapshot names stay in bucket %s: keep bucket versioning on, so a restore finds each as it was (docs/backups.md)",
			len(named), cfg.S3Bucket)
	} else {
		m.Storage = "local"
		for _, f := range named {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := checkRel(f.Path); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Why, err)
			}
			n, sum, err := copyFile(filepath.Join(dataDir, filepath.FromSlash(f.Path)), filepath.Join(out, filepath.FromSlash(f.Path)), "", dirs)
			if errors.Is(err, fs.ErrNotExist) {
				m.Missing = append(m.Missing, missingFile{Path: f.Path,
					Why: f.Why + ": gone before it was copied (its retention ended, or it was deleted, after the snapshot)"})
				continue
			}
			if err != nil {
				return nil, err
			}
			m.Files = append(m.Files, backupFile{Path: f.Path, Bytes: n, SHA256: sum})
			m.FilesBytes += n
		}
	}

	// Without the secret, signed media URLs, console sessions, sealed second factors and queued e-mails
	// of the restored installation would not verify or open. The same secret signs the manifest:
	// APP_SECRET, or in development DATA_DIR/app_secret, created here when no server has yet (as its first
	// start would; the database was there, so this is an installation, not a mistyped DATA_DIR).
	secretFromEnv := cfg.AppSecret != "" // config.Load reads APP_SECRET alone; EnsureSecret the file
	if err := cfg.EnsureSecret(); err != nil {
		return nil, err
	}
	if secretFromEnv {
		m.AppSecret = "APP_SECRET comes from the environment and is not in the backup: a restore needs the same value, " +
			"which also checks the backup's signature"
	} else if err := backupExtra(filepath.Join(dataDir, secretName), out, secretName, m, dirs); err != nil {
		return nil, fmt.Errorf("copy the development secret: %w", err)
	} else {
		m.AppSecret = "copied from DATA_DIR/" + secretName + ", which also signed this backup: keep the backup as secret " +
			"as the installation; its signature vouches for it only to an installation that has the secret already"
	}
	// The built-in simulator's credentials name the tasks' upstream slots (upstream_credentials ids are
	// their digests) and its task records are what it answers polls from; its rendered videos are not
	// copied: it renders them again on request.
	if err := backupSim(cfg.SimDataDir, out, m, dirs); err != nil {
		return nil, err
	}

	if err := syncDirs(dirs); err != nil {
		return nil, err
	}
	m.FinishedAt = time.Now().UTC()
	if err := writeManifest(out, m, cfg.Secrets()); err != nil {
		return nil, err
	}
	return m, nil
}

// snapshotSQLite copies the database with VACUUM INTO, which reads it in one transaction: in WAL mode
// that is one instant, and writers go on meanwhile. The copy is a single file (not in WAL mode), checked
// with quick_check and then read for the manifest, so its counts are the snapshot's.
func snapshotSQLite(ctx context.Context, dbPath, out string, m *manifest) ([]storedFile, error) {
	if _, err := os.Stat(dbPath); err != nil {
		return nil, fmt.Errorf("no SQLite database at %s (DATABASE_URL, or DATA_DIR/videogen.db): %w", dbPath, err)
	}
	// mode=rw: never create a database that is not there.
	src, err := sql.Open("sqlite", db.SQLiteDSN(dbPath, "mode=rw&_pragma=busy_timeout(10000)"))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dbPath, err)
	}
	defer src.Close()
	dst := filepath.Join(out, sqliteCopyName)
	if _, err := src.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return nil, fmt.Errorf("copy %s (VACUUM INTO): %w", dbPath, err)
	}
	_ = src.Close()
	// SQLite creates the file with the umask's mode; the copy is as private as the database.
	if err := os.Chmod(dst, 0o600); err != nil {
		return nil, err
	}
	if err := syncFile(dst); err != nil {
		return nil, err
	}
	cp, err := sql.Open("sqlite", db.SQLiteDSN(dst, "mode=ro"))
	if err != nil {
		return nil, fmt.Errorf("open the copy: %w", err)
	}
	defer cp.Close()
	// quick_check reads every page of the copy and checks its structure. integrity_check would also
	// match each index against its table, at three times the cost (20 s for a 260 MB database), for
	// indexes VACUUM INTO has just rebuilt from those very tables.
	var check string
	if err := cp.QueryRowContext(ctx, "PRAGMA quick_check").Scan(&check); err != nil || check != "ok" {
		return nil, fmt.Errorf("the copy fails SQLite's check: %q %v", check, err)
	}
	named, err := readSnapshot(ctx, cp, false, m)
	if err != nil {
		return nil, err
	}
	_ = cp.Close()
	if m.Database.Bytes, m.Database.SHA256, err = fileSHA256(dst); err != nil {
		return nil, err
	}
	m.Database.Path = sqliteCopyName
	return named, nil
}

// snapshotPostgres opens a repeatable-read transaction, exports its snapshot and has pg_dump copy that
// very snapshot (--snapshot): the manifest's counts and the files copied are those of the dump, to the
// row, while the application keeps writing.
func snapshotPostgres(ctx context.Context, rawURL, out string, m *manifest) ([]storedFile, error) {
	target, err := newPGTarget(rawURL)
	if err != nil {
		return nil, err
	}
	if _, err := pgTool("pg_dump"); err != nil {
		return nil, err
	}
	pool, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", target.shown, err)
	}
	defer pool.Close()
	tx, err := pool.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", target.shown, err)
	}
	defer func() { _ = tx.Rollback() }()
	var snapshot string
	if err := tx.QueryRowContext(ctx, "SELECT pg_export_snapshot()").Scan(&snapshot); err != nil {
		return nil, fmt.Errorf("export a snapshot of %s: %w", target.shown, err)
	}
	named, err := readSnapshot(ctx, tx, true, m)
	if err != nil {
		return nil, err
	}
	dst := filepath.Join(out, pgDumpName)
	// The transaction stays open while pg_dump runs: an exported snapshot lives as long as it does.
	if err := runPGTool(ctx, target, "pg_dump", "--format=custom", "--no-password", "--snapshot="+snapshot,
		"--file="+dst, "--dbname="+target.url); err != nil {
		return nil, err
	}
	_ = tx.Rollback()
	if err := os.Chmod(dst, 0o600); err != nil {
		return nil, err
	}
	if err := syncFile(dst); err != nil {
		return nil, err
	}
	// The archive's table of contents must read back: a dump pg_restore cannot list restores nothing.
	if err := runPGTool(ctx, target, "pg_restore", "--list", "--file="+os.DevNull, dst); err != nil {
		return nil, fmt.Errorf("the dump does not read back: %w", err)
	}
	if m.Database.Bytes, m.Database.SHA256, err = fileSHA256(dst); err != nil {
		return nil, err
	}
	m.Database.Path = pgDumpName
	return named, nil
}

// readSnapshot fills the manifest's schema version and row counts from q, and returns the files the
// rows name.
func readSnapshot(ctx context.Context, q querier, postgres bool, m *manifest) ([]storedFile, error) {
	var err error
	if m.SchemaVersion, err = schemaVersion(ctx, q); err != nil {
		return nil, err
	}
	tables, err := listTables(ctx, q, postgres)
	if err != nil {
		return nil, err
	}
	if m.Tables, err = countRows(ctx, q, tables); err != nil {
		return nil, err
	}
	return namedFiles(ctx, q)
}

// backupExtra copies one file of the installation's own into the backup under rel.
func backupExtra(src, out, rel string, m *manifest, dirs map[string]bool) error {
	n, sum, err := copyFile(src, filepath.Join(out, filepath.FromSlash(rel)), "", dirs)
	if err != nil {
		return err
	}
	m.Files = append(m.Files, backupFile{Path: rel, Bytes: n, SHA256: sum})
	m.FilesBytes += n
	return nil
}

// backupSim copies the simulator's folder but for its rendered videos (outputs/) and temporary files.
func backupSim(simDir, out string, m *manifest, dirs map[string]bool) error {
	err := filepath.WalkDir(simDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // no simulator here, or a task record deleted while walking
			}
			return err
		}
		rel, err := filepath.Rel(simDir, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && rel == "outputs":
			return filepath.SkipDir
		case d.IsDir() || strings.HasPrefix(d.Name(), "."):
			return nil
		}
		err = backupExtra(p, out, simPrefix+"/"+filepath.ToSlash(rel), m, dirs)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // the simulator deleted a finished task meanwhile
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("copy the simulator's folder %s: %w", simDir, err)
	}
	return nil
}

// writeManifest writes its signature (manifest.sig) and then manifest.json, each atomically, last of
// all: a folder with a manifest is a whole backup, and its signature is already there.
func writeManifest(out string, m *manifest, secrets []string) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	sig, err := signManifest(secrets, b)
	if err != nil {
		return err
	}
	if err := writeAtomically(out, signatureName, []byte(sig)); err != nil {
		return err
	}
	if err := writeAtomically(out, manifestName, b); err != nil {
		return err
	}
	return syncDirs(map[string]bool{out: true})
}

// writeAtomically writes b to dir/name through a synced temporary file, private to the owner.
func writeAtomically(dir, name string, b []byte) error {
	tmp := filepath.Join(dir, ".put-"+name)
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// readManifest reads a backup's manifest and checks that this binary understands it. It returns the
// bytes as read too: the signature is over them.
func readManifest(dir string) (*manifest, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("%s has no %s: it is not a finished videogen backup", dir, manifestName)
	}
	if err != nil {
		return nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", filepath.Join(dir, manifestName), err)
	}
	if m.Format != manifestFormat {
		return nil, nil, fmt.Errorf("%s is of format %d; this binary reads format %d", filepath.Join(dir, manifestName), m.Format, manifestFormat)
	}
	if m.Engine != engineSQLite && m.Engine != enginePostgres {
		return nil, nil, fmt.Errorf("%s names engine %q", filepath.Join(dir, manifestName), m.Engine)
	}
	for _, f := range append([]backupFile{m.Database}, m.Files...) {
		if err := checkRel(f.Path); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, manifestName), err)
		}
	}
	return &m, b, nil
}

func printBackup(w io.Writer, out string, m *manifest) {
	fmt.Fprintf(w, "backed up %s schema %d to %s in %.1fs\n", m.Engine, m.SchemaVersion, out, m.FinishedAt.Sub(m.StartedAt).Seconds())
	fmt.Fprintf(w, "  database: %s, %d bytes: %d accounts, %d tasks, %d ledger entries\n",
		m.Database.Path, m.Database.Bytes, m.Tables["accounts"], m.Tables["tasks"], m.Tables["ledger_entries"])
	if m.Storage == "local" {
		fmt.Fprintf(w, "  files: %d, %d bytes\n", len(m.Files), m.FilesBytes)
	} else {
		fmt.Fprintf(w, "  files: %s\n", m.StorageNote)
	}
	for _, f := range m.Missing {
		fmt.Fprintf(w, "  missing: %s (%s)\n", f.Path, f.Why)
	}
	fmt.Fprintf(w, "  secret: %s\n", m.AppSecret)
}

// binaryVersion names this build: its module version and VCS revision when the build recorded them.
func binaryVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			v += " " + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			v += " (modified)"
		}
	}
	return v
}

// listSome names the first few of names.
func listSome(names []string) string {
	if len(names) > 4 {
		return strings.Join(names[:4], ", ") + fmt.Sprintf(" and %d more", len(names)-4)
	}
	return strings.Join(names, ", ")
}
