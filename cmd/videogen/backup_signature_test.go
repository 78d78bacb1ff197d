package main_test

import (
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"videogen/internal/infra/seal"
	"videogen/internal/testkit"
	"videogen/models"
)

// The backup's own secrets: what a backup is signed with, and what a restore checks it with
// (docs/backups.md, "The signature").

// openFolder is an existing, empty folder that anyone may read and write (0777, whatever the umask).
func openFolder(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "backup")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkPrivate fails unless bk is 0700 and nothing in it is open to group or others.
func checkPrivate(t *testing.T, bk string) {
	t.Helper()
	if fi, err := os.Stat(bk); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("the backup's folder %s is %v, want 0700", bk, fi.Mode().Perm())
	}
	n := 0
	err := filepath.WalkDir(bk, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: open to group or others", p, fi.Mode().Perm())
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"manifest.json", "manifest.sig"} {
		if _, err := os.Stat(filepath.Join(bk, name)); err != nil {
			t.Errorf("the backup has no %s: %v", name, err)
		}
	}
	t.Logf("%d entries of %s checked", n, bk)
}

// TestBackupOutputIsPrivate: `videogen backup --out` into a folder that exists, empty, with mode 0777
// leaves it 0700, and the database copy (VACUUM INTO's file, or pg_dump's), the secret, the simulator's
// identity, the manifest and its signature are all 0600. TestBackupUnderWriteLoadRestores checks the
// same of a backup with stored videos and uploads.
func TestBackupOutputIsPrivate(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, newDB func(*testing.T) string) {
		dir := t.TempDir()
		env := installation(t, dir, newDB(t)) // development: the secret is DATA_DIR/app_secret, copied
		d := openInstallation(t, dir, env)
		testkit.NewAccount(t, d, "5")
		_ = d.Close()
		bk := openFolder(t)
		if out, stderr, code := run(t, dir, env, "backup", "--out", bk); code != 0 {
			t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
		}
		checkPrivate(t, bk)
		if _, err := os.Stat(filepath.Join(bk, "app_secret")); err != nil {
			t.Errorf("the development secret is not in the backup: %v", err)
		}
	})
}

// TestBackupOutsideDataDirJudgedThroughSymlinks: "--out must not be inside DATA_DIR" is judged by where
// the folders really are. A path that reaches DATA_DIR through a link outside it is refused, and so is
// a path into the real folder of a DATA_DIR that is itself a link; a link inside DATA_DIR that leads
// out of it is where the backup really goes, and is accepted. A restore --force over an installation
// whose DATA_DIR is a link, with the database named by its real path, moves the old database into
// DATA_DIR/replaced-<time>/ like the rest, not beside itself. (Paths only: the engines do not differ.)
func TestBackupOutsideDataDirJudgedThroughSymlinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "real-data")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "data-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// DATA_DIR is the link; the database is named by its real path.
	env := installation(t, dir, filepath.Join(real, "videogen.db"))
	env["DATA_DIR"] = link
	d := openInstallation(t, dir, env)
	a := testkit.NewAccount(t, d, "5")
	_ = d.Close()

	elsewhere := t.TempDir()
	into := filepath.Join(elsewhere, "into-data")
	if err := os.Symlink(real, into); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ what, out string }{
		{"through a link outside DATA_DIR that leads into it", filepath.Join(into, "nightly")},
		{"into the real folder of DATA_DIR, itself a link", filepath.Join(real, "nightly")},
	} {
		if out, stderr, code := run(t, dir, env, "backup", "--out", c.out); code == 0 || !strings.Contains(stderr, "inside DATA_DIR") {
			t.Errorf("a backup %s: exit %d\n%s%s", c.what, code, out, stderr)
		}
		if _, err := os.Lstat(filepath.Join(real, "nightly")); err == nil {
			t.Errorf("a backup %s was written into DATA_DIR", c.what)
			_ = os.RemoveAll(filepath.Join(real, "nightly")) // for the next case
		}
	}

	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(real, "offsite")); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, dir, env, "backup", "--out", filepath.Join(link, "offsite", "nightly"))
	if code != 0 {
		t.Fatalf("a backup through a link inside DATA_DIR to a folder outside it: exit %d\n%s%s", code, out, stderr)
	}
	bk := filepath.Join(outside, "nightly")
	checkPrivate(t, bk)

	// Restored over itself (the server stopped): DATA_DIR/app_secret is this installation's own secret,
	// which signed the backup. The link is no longer needed in DATA_DIR for what follows.
	if err := os.Remove(filepath.Join(real, "offsite")); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, dir, env, "restore", "--from", bk, "--force")
	if code != 0 || strings.Contains(stderr, "WARNING") {
		t.Fatalf("restore --force over the installation that made the backup: exit %d\n%s%s", code, out, stderr)
	}
	aside, _ := filepath.Glob(filepath.Join(real, "replaced-*", "videogen.db"))
	if stray, _ := filepath.Glob(filepath.Join(real, "videogen.db.replaced-*")); len(aside) != 1 || len(stray) != 0 {
		t.Fatalf("the replaced database: in replaced-*/ %v, beside itself %v (want it in replaced-*/ only)", aside, stray)
	}
	if role := accountRoleOf(t, dir, env, a.Email); role != models.AccountOwner {
		t.Errorf("after the restore %s is %q", a.Email, role)
	}
}

// withViewer gives the installation an account with an owner and a viewer, and returns the viewer's
// e-mail address.
func withViewer(t *testing.T, dir string, env map[string]string) string {
	t.Helper()
	d := openInstallation(t, dir, env)
	defer d.Close()
	owner := testkit.NewAccount(t, d, "5")
	viewer := testkit.NewAccount(t, d, "0")
	if err := d.W.Model(&models.User{}).Where("email = ?", viewer.Email).
		Updates(map[string]any{"account_id": owner.ID, "account_role": models.AccountViewer}).Error; err != nil {
		t.Fatal(err)
	}
	return viewer.Email
}

// copyBackup copies a backup's folder, for a test to alter the copy.
func copyBackup(t *testing.T, bk string) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(cp, os.DirFS(bk)); err != nil {
		t.Fatal(err)
	}
	return cp
}

// alterRole does what an attacker holding a backup would: makes email an owner in the backup's
// database — UPDATE in the SQLite copy, or pg_restore into a scratch database, UPDATE and pg_dump again
// — and writes the new file's SHA-256 and size into manifest.json, so every digest matches.
func alterRole(t *testing.T, bk, email string) {
	t.Helper()
	m := readBackupManifest(t, bk)
	dbFile := filepath.Join(bk, m.Database.Path)
	update := func(driver, dsn string) {
		conn, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		q := "UPDATE users SET account_role = 'owner' WHERE email = ?"
		if driver == "pgx" {
			q = strings.Replace(q, "?", "$1", 1)
		}
		if res, err := conn.Exec(q, email); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("altered %d rows", n)
		}
	}
	if m.Engine == "sqlite" {
		update("sqlite", "file:"+dbFile)
	} else {
		scratch := freshDatabase(t)
		for _, args := range [][]string{
			{"pg_restore", "--no-owner", "--exit-on-error", "--dbname=" + scratch, dbFile},
			{"pg_dump", "--format=custom", "--file=" + dbFile, "--dbname=" + scratch},
		} {
			if args[0] == "pg_dump" {
				update("pgx", scratch)
			}
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", args[0], err, out)
			}
		}
	}
	b, err := os.ReadFile(dbFile)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	rewriteManifest(t, bk, func(raw map[string]any) {
		database := raw["database"].(map[string]any)
		database["sha256"], database["bytes"] = hex.EncodeToString(sum[:]), len(b)
	})
}

// rewriteManifest edits manifest.json as JSON, the way anyone with a text editor would.
func rewriteManifest(t *testing.T, bk string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(bk, "manifest.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	edit(raw)
	if b, err = json.MarshalIndent(raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

// accountRoleOf reads email's account role in the installation's database.
func accountRoleOf(t *testing.T, dir string, env map[string]string, email string) string {
	t.Helper()
	d := openInstallation(t, dir, env)
	defer d.Close()
	var u models.User
	if err := d.R.Where("email = ?", email).Take(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u.AccountRole
}

// checkUntouched fails if a refused restore wrote anything: DATA_DIR holds nothing, and the database
// (PostgreSQL) has no table, or the SQLite file does not exist.
func checkUntouched(t *testing.T, dir string, env map[string]string) {
	t.Helper()
	if entries, _ := os.ReadDir(env["DATA_DIR"]); len(entries) > 0 {
		t.Errorf("the refused restore wrote into DATA_DIR: %d entries", len(entries))
	}
	if u := env["DATABASE_URL"]; u == "" {
		if _, err := os.Stat(databaseOf(dir, env)); err == nil {
			t.Error("the refused restore left a database file")
		}
	} else {
		conn, err := sql.Open("pgx", u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var tables int
		if err := conn.QueryRow(`SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`).Scan(&tables); err != nil {
			t.Fatal(err)
		} else if tables > 0 {
			t.Errorf("the refused restore created %d tables", tables)
		}
	}
}

// TestRestoreRefusesAnAlteredBackup: an attacker with a production backup (APP_SECRET set) makes a viewer
// an owner in its database and writes the database's new SHA-256 into manifest.json: every digest
// matches, and videogen restore refuses it all the same, because the manifest's signature does not
// verify, before touching DATA_DIR or the database. With --allow-unsigned it restores, saying loudly on
// stderr what that risks. A backup made under another APP_SECRET is refused; one made under a secret
// rotated out but still listed second in APP_SECRET is accepted; one without manifest.sig (made before
// backups were signed) is refused with a message saying so.
func TestRestoreRefusesAnAlteredBackup(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, newDB func(*testing.T) string) {
		dir := t.TempDir()
		env := withSecret(installation(t, dir, newDB(t)), backupSecret)
		viewer := withViewer(t, dir, env)
		bk := filepath.Join(t.TempDir(), "backup")
		if out, stderr, code := run(t, dir, env, "backup", "--out", bk); code != 0 {
			t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
		}
		target := func(secret string) (string, map[string]string) {
			dir := t.TempDir()
			return dir, withSecret(installation(t, dir, newDB(t)), secret)
		}

		altered := copyBackup(t, bk)
		alterRole(t, altered, viewer)
		dir2, env2 := target(backupSecret)
		_, stderr, code := run(t, dir2, env2, "restore", "--from", altered)
		if code != 1 || !strings.Contains(stderr, "does not verify") || !strings.Contains(stderr, "--allow-unsigned") {
			t.Fatalf("restore of an altered backup: exit %d %q", code, stderr)
		}
		checkUntouched(t, dir2, env2)
		out, stderr, code := run(t, dir2, env2, "restore", "--from", altered, "--allow-unsigned")
		if code != 0 || !regexp.MustCompile(`(?m)^WARNING: --allow-unsigned: .* signature does not verify: .*could have changed any row`).MatchString(stderr) {
			t.Fatalf("restore --allow-unsigned of an altered backup: exit %d\n%s%s", code, out, stderr)
		}
		if role := accountRoleOf(t, dir2, env2, viewer); role != models.AccountOwner {
			t.Fatalf("the altered backup restored with --allow-unsigned: the viewer is %q (the alteration did not take?)", role)
		}

		dir3, env3 := target("another-installations-secret")
		if _, stderr, code := run(t, dir3, env3, "restore", "--from", bk); code != 1 || !strings.Contains(stderr, "does not verify") {
			t.Fatalf("restore of a backup made under another APP_SECRET: exit %d %q", code, stderr)
		}
		checkUntouched(t, dir3, env3)

		dir4, env4 := target("the-new-secret," + backupSecret)
		if out, stderr, code := run(t, dir4, env4, "restore", "--from", bk); code != 0 || strings.Contains(stderr, "WARNING") {
			t.Fatalf("restore under APP_SECRET=new,old of a backup signed with old: exit %d\n%s%s", code, out, stderr)
		}
		if role := accountRoleOf(t, dir4, env4, viewer); role != models.AccountViewer {
			t.Errorf("restored from the backup as made, the viewer is %q", role)
		}

		old := copyBackup(t, bk)
		if err := os.Remove(filepath.Join(old, "manifest.sig")); err != nil {
			t.Fatal(err)
		}
		dir5, env5 := target(backupSecret)
		if _, stderr, code := run(t, dir5, env5, "restore", "--from", old); code != 1 ||
			!strings.Contains(stderr, "made before videogen signed its backups") || !strings.Contains(stderr, "--allow-unsigned") {
			t.Fatalf("restore of a backup without a signature: exit %d %q", code, stderr)
		}
		checkUntouched(t, dir5, env5)
	})
}

// TestRestoreOfADevelopmentBackup: without APP_SECRET the secret is DATA_DIR/app_secret, which the backup
// creates if the server never did, copies, and signs with. It travels in the backup, so a restore never
// checks the signature with it: on a fresh machine with no secret of its own the restore is refused,
// saying to set APP_SECRET or pass --allow-unsigned — even when the attacker re-signed an altered
// manifest with the backup's own secret; --allow-unsigned restores it, warning, and the secret comes
// back. Restored over the installation that made it (--force), its own DATA_DIR/app_secret verifies
// the signature.
func TestRestoreOfADevelopmentBackup(t *testing.T) {
	t.Parallel()
	eachEngine(t, func(t *testing.T, newDB func(*testing.T) string) {
		dir := t.TempDir()
		env := installation(t, dir, newDB(t))
		viewer := withViewer(t, dir, env)
		bk := filepath.Join(t.TempDir(), "backup")
		if out, stderr, code := run(t, dir, env, "backup", "--out", bk); code != 0 {
			t.Fatalf("backup: exit %d\n%s%s", code, out, stderr)
		}
		secret, err := os.ReadFile(filepath.Join(env["DATA_DIR"], "app_secret"))
		if err != nil {
			t.Fatalf("the backup did not create the development secret: %v", err)
		}
		if copied, err := os.ReadFile(filepath.Join(bk, "app_secret")); err != nil || string(copied) != string(secret) {
			t.Fatalf("the backup's app_secret is not the installation's: %v", err)
		}

		// The attacker's copy: altered, its digests updated, and signed again with the secret it carries.
		forged := copyBackup(t, bk)
		alterRole(t, forged, viewer)
		mac, err := seal.NewMAC([]string{strings.TrimSpace(string(secret))}, seal.BackupManifest)
		if err != nil {
			t.Fatal(err)
		}
		manifest, err := os.ReadFile(filepath.Join(forged, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(forged, "manifest.sig"), []byte("hmac-sha256:"+mac.Sum(manifest)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}

		for _, from := range []string{forged, bk} {
			dir2 := t.TempDir()
			env2 := installation(t, dir2, newDB(t))
			_, stderr, code := run(t, dir2, env2, "restore", "--from", from)
			if code != 1 || !strings.Contains(stderr, "no secret to check") || !strings.Contains(stderr, "APP_SECRET") ||
				!strings.Contains(stderr, "--allow-unsigned") {
				t.Fatalf("restore of %s on a machine without a secret: exit %d %q", filepath.Base(from), code, stderr)
			}
			checkUntouched(t, dir2, env2)
		}

		dir3 := t.TempDir()
		env3 := installation(t, dir3, newDB(t))
		out, stderr, code := run(t, dir3, env3, "restore", "--from", bk, "--allow-unsigned")
		if code != 0 || !regexp.MustCompile(`(?m)^WARNING: --allow-unsigned: .* signature cannot be checked`).MatchString(stderr) {
			t.Fatalf("restore --allow-unsigned of a development backup: exit %d\n%s%s", code, out, stderr)
		}
		if got, err := os.ReadFile(filepath.Join(env3["DATA_DIR"], "app_secret")); err != nil || string(got) != string(secret) {
			t.Errorf("the restored secret differs from the installation's: %v", err)
		}

		// Over itself: its own secret checks the signature (PostgreSQL restores into an empty database).
		again := map[string]string{}
		for k, v := range env {
			again[k] = v
		}
		if again["DATABASE_URL"] != "" {
			again["DATABASE_URL"] = newDB(t)
		}
		if out, stderr, code := run(t, dir, again, "restore", "--from", bk, "--force"); code != 0 || strings.Contains(stderr, "WARNING") {
			t.Fatalf("restore --force over the installation that made it: exit %d\n%s%s", code, out, stderr)
		}
	})
}
