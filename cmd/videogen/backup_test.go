package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for fresh databases

	"videogen/billing"
	"videogen/internal/domain/audit"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

// The model the backup tests buy: the cheapest, and its 4-second video is about 3 MB.
const backupModel = "videogen-2.0-mini-480p"

// eachEngine runs fn on SQLite always and on PostgreSQL when TEST_DATABASE_URL is set. newDB gives a
// DATABASE_URL for a fresh database: "" on SQLite, where the installation's DATA_DIR holds the file.
// The two run side by side: each has its own folders, database and ports.
func eachEngine(t *testing.T, fn func(t *testing.T, newDB func(*testing.T) string)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, func(*testing.T) string { return "" })
	})
	if os.Getenv("TEST_DATABASE_URL") != "" {
		t.Run("postgres", func(t *testing.T) {
			t.Parallel()
			fn(t, freshDatabase)
		})
	}
}

// freshDatabase creates a PostgreSQL database of its own, dropped when the test ends: pg_dump and
// pg_restore work on whole databases, not on testkit's schema per test.
func freshDatabase(t *testing.T) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Fatal("TEST_DATABASE_URL is not set")
	}
	return ownDatabase(t, base, "vgbackup_")
}

// installation is the environment of an installation in dir: its DATA_DIR, the database (dbURL, or
// SQLite under DATA_DIR when it is ""), its address (PUBLIC_BASE_URL names it: the simulator fetches
// media from there), a quick simulator and no rate limit in the way.
func installation(t *testing.T, dir, dbURL string) map[string]string {
	addr := testkit.FreeAddr(t)
	env := map[string]string{"DATA_DIR": filepath.Join(dir, "data"), "ADDR": addr, "PUBLIC_BASE_URL": "http://" + addr, "SIM_DURATION": "100ms",
		"POLL_INTERVAL_MIN": "10ms", "POLL_INTERVAL_MAX": "100ms", "RATE_LIMIT_RPS": "100000",
		"RATE_LIMIT_BURST": "100000", "LOG_LEVEL": "error"}
	if dbURL != "" {
		env["DATABASE_URL"] = dbURL
	}
	return env
}

// backupSecret is the APP_SECRET of the tests' production-like installations: the one that backs up and
// the one that restores have it both, as production's do (a restore checks the backup's signature
// with it).
const backupSecret = "backup-test-secret-0123456789abcdef"

// withSecret sets env's APP_SECRET (several values comma-separated: the first signs, all verify).
func withSecret(env map[string]string, secret string) map[string]string {
	env["APP_SECRET"] = secret
	return env
}

// openInstallation opens (and migrates) an installation's database for the test's own reads and writes.
func openInstallation(t *testing.T, dir string, env map[string]string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), databaseOf(dir, env))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Migrate(context.Background()); err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	return d
}

// stopServer sends SIGTERM and waits for the process to exit.
func stopServer(t *testing.T, p *process) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit 30 s after SIGTERM")
	}
}

// backupManifest is what the tests read of manifest.json.
type backupManifest struct {
	Engine   string           `json:"engine"`
	Tables   map[string]int64 `json:"tables"`
	Storage  string           `json:"storage"`
	Database struct {
		Path   string `json:"path"`
		SHA256 string `json:"sha256"`
	} `json:"database"`
	Files []struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	} `json:"files"`
	FilesBytes int64 `json:"files_bytes"`
	Missing    []any `json:"missing"`
}

func readBackupManifest(t *testing.T, dir string) backupManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m backupManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	return m
}

// columnValues reads one column of a table, for the rows before a backup.
func columnValues(t *testing.T, d *db.DB, table, column string) []string {
	t.Helper()
	var out []string
	if err := d.R.Table(table).Order(column).Pluck(column, &out).Error; err != nil {
		t.Fatal(err)
	}
	return out
}

func count(t *testing.T, d *db.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := d.R.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackupUnderWriteLoadRestores: `videogen backup` runs beside a server taking creates and wallet
// credits as fast as it can; the backup restores into a fresh DATA_DIR (SQLite) or a fresh database
// through pg_restore (PostgreSQL), where `videogen audit` finds the books in order, every task and
// ledger entry written before the backup began is there, the counts are exactly the manifest's, every
// video completed in the snapshot downloads with the same bytes, the keys authenticate and an uploaded
// file's signed URL still opens (the same APP_SECRET, which also verified the backup's signature). The
// backup's folder existed, empty and open to all (0777): the backup made it 0700, and nothing in it is
// readable by group or others.
func TestBackupUnderWriteLoadRestores(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, newDB func(*testing.T) string) {
		ctx := context.Background()
		dir := t.TempDir()
		env := withSecret(installation(t, dir, newDB(t)), backupSecret)
		d := openInstallation(t, dir, env)
		defer d.Close()
		a, b := testkit.NewAccount(t, d, "1000"), testkit.NewAccount(t, d, "1000")
		keyOf := map[int64]string{a.ID: a.Key, b.ID: b.Key}
		p := serve(t, dir, env)
		src := &testkit.Server{URL: p.url}

		// Before the load: an upload a video uses, three more videos, one that fails.
		style := testkit.PNG(t, 64, 64)
		up := src.Upload(t, a.Key, "", testkit.File("image_files", "style.png", style))
		if up.Status != 200 {
			t.Fatalf("upload: %d %s", up.Status, up.Body)
		}
		styleURL := up.Answer(t).ImageURLs[0]
		var early []string
		for i, body := range []map[string]any{
			{"image_urls": []string{styleURL}}, {}, {}, {"prompt": "[sim:fail] a storm"},
		} {
			body["model"] = backupModel
			if body["prompt"] == nil {
				body["prompt"] = fmt.Sprintf("before the backup %d", i)
			}
			key := []string{a.Key, b.Key}[i%2]
			early = append(early, src.CreateVideo(t, key, body)["id"].(string))
		}
		for i, id := range early {
			want := []string{"completed"}
			if i == 3 {
				want = []string{"failed"}
			}
			src.WaitStatus(t, []string{a.Key, b.Key}[i%2], id, 30*time.Second, want...)
		}
		tasksBefore, entriesBefore := columnValues(t, d, "tasks", "id"), columnValues(t, d, "ledger_entries", "id")

		// The load: creates on both accounts (a full backlog's 429 is the product working), and audited
		// wallet credits written by this process beside the server.
		loadCtx, stopLoad := context.WithCancel(ctx)
		defer stopLoad()
		var creates, credits atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for _, key := range []string{a.Key, b.Key} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; loadCtx.Err() == nil; i++ {
					status, err := postVideo(p.url, key, fmt.Sprintf("under load %d", i))
					switch {
					case err != nil:
						errs <- err
						return
					case status == 200:
						creates.Add(1)
					case status != 429:
						errs <- fmt.Errorf("create under load: status %d", status)
						return
					}
					time.Sleep(40 * time.Millisecond)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for loadCtx.Err() == nil {
				if _, err := (billing.Adjustment{AccountID: b.ID, Amount: money.PerUSD, Reason: "credit under load", By: audit.CLI}).Apply(ctx, d); err != nil {
					errs <- fmt.Errorf("credit under load: %w", err)
					return
				}
				credits.Add(1)
				time.Sleep(5 * time.Millisecond)
			}
		}()
		testkit.Eventually(t, 20*time.Second, "the load runs", func() bool { return creates.Load() >= 3 && credits.Load() >= 3 })

		bk := openFolder(t)
		writesBefore := creates.Load() + credits.Load()
		started := time.Now()
		out, stderr, code := run(t, dir, env, "backup", "--out", bk)
		backupTook := time.Since(started)
		writesDuring := creates.Load() + credits.Load() - writesBefore
		stopLoad()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if code != 0 {
			t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
		}
		if writesDuring == 0 {
			t.Fatal("nothing was written while the backup ran: the test did not test a backup under load")
		}
		checkPrivate(t, bk)
		m := readBackupManifest(t, bk)
		t.Logf("backup under load: %s (%d writes meanwhile): %d tables, %d tasks, %d ledger entries, %d files, %.1f MB",
			backupTook.Round(time.Millisecond), writesDuring, len(m.Tables), m.Tables["tasks"], m.Tables["ledger_entries"], len(m.Files), float64(m.FilesBytes)/1e6)
		if len(m.Missing) > 0 || m.Storage != "local" {
			t.Errorf("manifest: storage %q, missing %v (nothing expired or was deleted here)", m.Storage, m.Missing)
		}
		if m.Tables["tasks"] < int64(len(tasksBefore)) || m.Tables["ledger_entries"] < int64(len(entriesBefore)) {
			t.Fatalf("the manifest counts fewer rows than were there before the backup: %v", m.Tables)
		}

		// A fresh installation from the backup.
		dir2 := t.TempDir()
		env2 := withSecret(installation(t, dir2, newDB(t)), backupSecret)
		started = time.Now()
		out, stderr, code = run(t, dir2, env2, "restore", "--from", bk)
		t.Logf("restore: %s", time.Since(started).Round(time.Millisecond))
		if code != 0 || !strings.Contains(out, "ledger and task counters agree") || strings.Contains(stderr, "WARNING") {
			t.Fatalf("restore: exit %d\n%s%s", code, out, stderr)
		}
		if out, stderr, code := run(t, dir2, env2, "audit"); code != 0 || !strings.Contains(out, "ledger and task counters agree") {
			t.Fatalf("audit of the restored installation: exit %d\n%s%s", code, out, stderr)
		}
		// A stored file changed in a copy, the manifest left as it is: the signature verifies, the file's
		// SHA-256 does not, and the restore refuses it.
		changed := copyBackup(t, bk)
		if err := os.WriteFile(filepath.Join(changed, filepath.FromSlash(m.Files[0].Path)), []byte("not the file"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir3 := t.TempDir()
		env3 := withSecret(installation(t, dir3, newDB(t)), backupSecret)
		if _, stderr, code := run(t, dir3, env3, "restore", "--from", changed); code != 1 || !strings.Contains(stderr, "damaged") {
			t.Fatalf("restore of a backup with a changed file: exit %d %q", code, stderr)
		}
		r := openInstallation(t, dir2, env2)
		defer r.Close()
		if r.Postgres {
			checkAuditLogNarrowed(t, r)
		}
		for _, c := range []struct {
			table, column string
			before        []string
		}{{"tasks", "id", tasksBefore}, {"ledger_entries", "id", entriesBefore}} {
			restored := columnValues(t, r, c.table, c.column)
			for _, id := range c.before {
				if !slices.Contains(restored, id) {
					t.Errorf("%s %s, written before the backup began, is not in the restored database", c.table, id)
				}
			}
		}
		for _, table := range []string{"accounts", "api_keys", "tasks", "ledger_entries", "media", "task_media", "audit_log"} {
			if got := count(t, r, table); got != m.Tables[table] {
				t.Errorf("restored %s: %d rows, the manifest %d", table, got, m.Tables[table])
			}
		}
		var completed []models.Task
		if err := r.R.Where("status = ? AND output_key IS NOT NULL", "completed").Find(&completed).Error; err != nil {
			t.Fatal(err)
		}
		if len(completed) < 3 {
			t.Fatalf("%d completed videos restored, want at least the 3 completed before the backup", len(completed))
		}

		if r.Postgres {
			restoreByTheDocumentedSteps(t, bk, env2)
		}
		p2 := serve(t, dir2, env2)
		for _, task := range completed {
			key := keyOf[task.AccountID]
			want := src.Do(t, "GET", "/v1/videos/"+task.ID+"/content", key, nil)
			got := testkit.Do(t, p2.url, "GET", "/v1/videos/"+task.ID+"/content", key, nil)
			if want.Status != 200 || got.Status != 200 || !bytes.Equal(got.Body, want.Body) {
				t.Errorf("video %s: restored %d (%d bytes), original %d (%d bytes)", task.ID, got.Status, len(got.Body), want.Status, len(want.Body))
			}
		}
		if got := testkit.Do(t, p2.url, "GET", "/v1/videos/"+early[0]+"/content?variant=thumbnail", a.Key, nil); got.Status != 200 {
			t.Errorf("the restored thumbnail of %s: %d", early[0], got.Status)
		}
		for _, key := range []string{a.Key, b.Key} {
			if got := testkit.Do(t, p2.url, "GET", "/v1/videos", key, nil); got.Status != 200 {
				t.Errorf("GET /v1/videos with a restored key: %d %s", got.Status, got.Body)
			}
		}
		u, err := url.Parse(styleURL)
		if err != nil {
			t.Fatal(err)
		}
		if got := testkit.Do(t, p2.url, "GET", u.RequestURI(), "", nil); got.Status != 200 || !bytes.Equal(got.Body, style) {
			t.Errorf("the uploaded file's signed URL on the restored installation: %d, %d bytes", got.Status, len(got.Body))
		}
	})
}

// postVideo creates a video without failing the test, for the load's goroutines.
func postVideo(base, key, prompt string) (int, error) {
	body := fmt.Sprintf(`{"model":%q,"prompt":%q,"seconds":4}`, backupModel, prompt)
	req, err := http.NewRequest("POST", base+"/v1/videos", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// TestRestoreRefusesWhatItWouldOverwrite: a backup never lands in a folder that holds one; a restore
// refuses a DATA_DIR that holds an installation (saying --force) and one a running server uses (even
// with --force), refuses a damaged backup and a SQLite backup for PostgreSQL, and with --force moves
// the installation that was there aside instead of deleting it.
func TestRestoreRefusesWhatItWouldOverwrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := withSecret(installation(t, dir, ""), backupSecret)
	d := openInstallation(t, dir, env)
	a := testkit.NewAccount(t, d, "25")
	_ = d.Close()
	bk := filepath.Join(t.TempDir(), "backup")
	if out, stderr, code := run(t, dir, env, "backup", "--out", bk); code != 0 {
		t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := run(t, dir, env, "backup", "--out", bk); code == 0 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a second backup into the same folder: exit %d %q", code, stderr)
	}
	if _, stderr, code := run(t, dir, env, "backup", "--out", filepath.Join(dir, "data", "nightly")); code == 0 || !strings.Contains(stderr, "inside DATA_DIR") {
		t.Fatalf("a backup inside DATA_DIR: exit %d %q", code, stderr)
	}

	// The target already holds another installation.
	dir2 := t.TempDir()
	env2 := withSecret(installation(t, dir2, ""), backupSecret)
	d2 := openInstallation(t, dir2, env2)
	other := testkit.NewAccount(t, d2, "1")
	_ = d2.Close()
	dbFile := databaseOf(dir2, env2)
	sum := func() string {
		b, err := os.ReadFile(dbFile)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", b)
	}
	was := sum()
	_, stderr, code := run(t, dir2, env2, "restore", "--from", bk)
	if code != 1 || !strings.Contains(stderr, "not empty") || !strings.Contains(stderr, "--force") {
		t.Fatalf("restore into a DATA_DIR with an installation: exit %d %q", code, stderr)
	}
	if sum() != was {
		t.Fatal("the refused restore changed the database that was there")
	}

	// Not under a running server, --force or not.
	p := serve(t, dir2, env2)
	if _, stderr, code := run(t, dir2, env2, "restore", "--from", bk, "--force"); code != 1 || !strings.Contains(stderr, "open in another process") {
		t.Fatalf("restore --force under a running server: exit %d %q", code, stderr)
	}
	stopServer(t, p)

	out, stderr, code := run(t, dir2, env2, "restore", "--from", bk, "--force")
	if code != 0 || !strings.Contains(out, "replaced-") || !strings.Contains(out, "ledger and task counters agree") {
		t.Fatalf("restore --force: exit %d\n%s%s", code, out, stderr)
	}
	aside, _ := filepath.Glob(filepath.Join(dir2, "data", "replaced-*", "videogen.db"))
	if len(aside) != 1 {
		t.Fatalf("the replaced database was not moved aside: %v", aside)
	}
	accountsIn := func(path string) []string {
		d, err := db.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var emails []string
		if err := d.R.Model(&models.User{}).Order("email").Pluck("email", &emails).Error; err != nil {
			t.Fatal(err)
		}
		return emails
	}
	if got := accountsIn(dbFile); !slices.Equal(got, []string{a.Email}) {
		t.Errorf("the restored database has users %v, want %s", got, a.Email)
	}
	if got := accountsIn(aside[0]); !slices.Equal(got, []string{other.Email}) {
		t.Errorf("the database moved aside has users %v, want %s", got, other.Email)
	}
	if out, stderr, code := run(t, dir2, env2, "audit"); code != 0 {
		t.Fatalf("audit after restore --force: exit %d\n%s%s", code, out, stderr)
	}

	// A damaged backup is refused, and leaves no database behind.
	damaged := filepath.Join(t.TempDir(), "damaged")
	if err := os.CopyFS(damaged, os.DirFS(bk)); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(damaged, "videogen.db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("damage"), 20000); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	dir3 := t.TempDir()
	env3 := withSecret(installation(t, dir3, ""), backupSecret)
	if _, stderr, code := run(t, dir3, env3, "restore", "--from", damaged); code != 1 || !strings.Contains(stderr, "damaged") {
		t.Fatalf("restore of a damaged backup: exit %d %q", code, stderr)
	}
	if _, err := os.Stat(databaseOf(dir3, env3)); err == nil {
		t.Fatal("a damaged backup left a database in place")
	}

	// A SQLite backup does not go into PostgreSQL; the refusal says what does.
	env4 := withSecret(installation(t, t.TempDir(), "postgres://nobody@127.0.0.1:1/none"), backupSecret)
	if _, stderr, code := run(t, dir, env4, "restore", "--from", bk); code != 1 || !strings.Contains(stderr, "migrate-to-postgres") {
		t.Fatalf("a SQLite backup into PostgreSQL: exit %d %q", code, stderr)
	}
}

// TestBackupWithS3LeavesTheFilesInTheBucket: with S3 storage the backup copies the database and the
// simulator's identity (and the secret, in development) but no stored file, and says where they are;
// restored beside the same bucket, with the same APP_SECRET, the installation serves the video it had.
func TestBackupWithS3LeavesTheFilesInTheBucket(t *testing.T) {
	t.Parallel()
	s3 := testkit.StartS3(t)
	withS3 := func(env map[string]string) map[string]string {
		env["S3_ENDPOINT"], env["S3_BUCKET"], env["S3_ACCESS_KEY_ID"], env["S3_SECRET_ACCESS_KEY"] = s3.Endpoint, s3.Bucket, s3.AccessKeyID, s3.SecretAccessKey
		return env
	}
	dir := t.TempDir()
	env := withSecret(withS3(installation(t, dir, "")), backupSecret)
	d := openInstallation(t, dir, env)
	a := testkit.NewAccount(t, d, "10")
	_ = d.Close()
	p := serve(t, dir, env)
	src := &testkit.Server{URL: p.url}
	id := src.CreateVideo(t, a.Key, map[string]any{"model": backupModel, "prompt": "kept in the bucket"})["id"].(string)
	src.WaitStatus(t, a.Key, id, 30*time.Second, "completed")
	video := src.Do(t, "GET", "/v1/videos/"+id+"/content", a.Key, nil)
	if video.Status != 200 {
		t.Fatalf("download: %d", video.Status)
	}
	bk := filepath.Join(t.TempDir(), "backup")
	out, stderr, code := run(t, dir, env, "backup", "--out", bk)
	if code != 0 || !strings.Contains(out, s3.Bucket) {
		t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
	}
	stopServer(t, p)
	m := readBackupManifest(t, bk)
	if m.Storage != "s3" {
		t.Errorf("manifest storage %q, want s3", m.Storage)
	}
	for _, f := range m.Files {
		if f.Path != "app_secret" && !strings.HasPrefix(f.Path, "sim/") {
			t.Errorf("the backup copied %s, which lives in the bucket", f.Path)
		}
	}
	dir2 := t.TempDir()
	env2 := withSecret(withS3(installation(t, dir2, "")), backupSecret)
	if out, stderr, code := run(t, dir2, env2, "restore", "--from", bk); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, stderr)
	}
	p2 := serve(t, dir2, env2)
	if got := testkit.Do(t, p2.url, "GET", "/v1/videos/"+id+"/content", a.Key, nil); got.Status != 200 || !bytes.Equal(got.Body, video.Body) {
		t.Fatalf("the restored installation's video from the bucket: %d, %d bytes (want %d)", got.Status, len(got.Body), len(video.Body))
	}
}

// checkAuditLogNarrowed fails unless the restoring role lost UPDATE, DELETE and TRUNCATE on the audit
// log, as the migration that made it had them taken. It reads the ACL itself, not has_table_privilege:
// the tests run as a superuser, who passes every privilege check.
func checkAuditLogNarrowed(t *testing.T, d *db.DB) {
	t.Helper()
	var granted []string
	if err := d.R.Raw(`SELECT a.privilege_type FROM pg_class c, aclexplode(c.relacl) a
		WHERE c.relname = 'audit_log' AND c.relnamespace = current_schema()::regnamespace
		AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = current_user) ORDER BY 1`).Scan(&granted).Error; err != nil {
		t.Fatal(err)
	}
	if len(granted) == 0 || slices.ContainsFunc(granted, func(p string) bool { return p == "UPDATE" || p == "DELETE" || p == "TRUNCATE" }) {
		t.Errorf("the restored audit log grants the restoring role %v (want neither UPDATE, DELETE nor TRUNCATE)", granted)
	}
}

// restoreByTheDocumentedSteps runs docs/backups.md's by-hand PostgreSQL restore of bk, as it is written
// there, into a fresh database: the audit passes and the audit log is as narrow as the migration left
// it. Then `videogen restore` refuses that database, no longer empty, and env's (restored already).
func restoreByTheDocumentedSteps(t *testing.T, bk string, env map[string]string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/backups.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- tested: restoreByTheDocumentedSteps -->\n```sh\n(.*?)\n```\n").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/backups.md has no block marked for this test")
	}
	dir := t.TempDir()
	byHand := withSecret(installation(t, dir, freshDatabase(t)), env["APP_SECRET"])
	script := exec.Command("bash", "-euo", "pipefail", "-c", string(block[1]))
	script.Dir = dir
	script.Env = append(environ(map[string]string{"DATABASE_URL": byHand["DATABASE_URL"], "DATA_DIR": byHand["DATA_DIR"], "BACKUP": bk}),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH")) // the last PATH= wins
	out, err := script.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ledger and task counters agree") {
		t.Fatalf("the documented steps: %v\n%s", err, out)
	}
	r := openInstallation(t, dir, byHand)
	defer r.Close()
	checkAuditLogNarrowed(t, r)
	m := readBackupManifest(t, bk)
	for _, table := range []string{"accounts", "tasks", "ledger_entries"} {
		if got := count(t, r, table); got != m.Tables[table] {
			t.Errorf("restored by hand, %s has %d rows, the manifest %d", table, got, m.Tables[table])
		}
	}
	for _, e := range []map[string]string{byHand, env} {
		if _, stderr, code := run(t, dir, e, "restore", "--from", bk); code != 1 || !strings.Contains(stderr, "already has") {
			t.Fatalf("videogen restore into a database that has tables: exit %d %q", code, stderr)
		}
	}
}
