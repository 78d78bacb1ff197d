package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsRefuseToCreateADatabase: run from a folder that is not the server's, every operator
// command that works on a deployment's data — the read commands (wallet balance, audit, ledger check,
// report margin, upstreams status) and those that change what is there — fails with the database file it
// looked for and how to point it at the right one, and creates nothing: no empty database that would
// answer "no user with this e-mail". Only accounts create (a new installation's first command) and
// migrate may start a database, and accounts create says so.
func TestCommandsRefuseToCreateADatabase(t *testing.T) {
	for _, args := range [][]string{
		{"wallet", "balance", "--email", "you@example.com"},
		{"audit"},
		{"ledger", "check"},
		{"report", "margin"},
		{"upstreams", "status"},
		{"keys", "create", "--email", "you@example.com"},
		{"keys", "revoke", "--prefix", "vg_AbCdEfGh"},
		{"wallet", "credit", "--email", "you@example.com", "--usd", "5", "--reason", "x"},
		{"accounts", "role", "--email", "you@example.com", "--role", "admin"},
		{"accounts", "disable", "--email", "you@example.com", "--reason", "x"},
		{"upstreams", "reload"},
		{"stripe", "reconcile"},
	} {
		name, _, _ := strings.Cut(strings.Join(args, " "), " --")
		t.Run(name, func(t *testing.T) {
			for _, dataDir := range []string{"", "elsewhere/data"} {
				dir := t.TempDir()
				env := map[string]string{"STRIPE_SECRET_KEY": "sk_test_x"}
				want := filepath.Join(dir, "data", "videogen.db")
				if dataDir != "" {
					env["DATA_DIR"] = dataDir
					want = filepath.Join(dir, dataDir, "videogen.db")
				}
				_, stderr, code := run(t, dir, env, args...)
				if code == 0 || !strings.Contains(stderr, "no database at "+want+": ") ||
					!strings.Contains(stderr, "DATA_DIR") || !strings.Contains(stderr, "DATABASE_URL") {
					t.Errorf("DATA_DIR %q: exit %d, stderr %q; want a failure naming %s and how to set DATA_DIR or DATABASE_URL", dataDir, code, stderr, want)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Errorf("DATA_DIR %q: the command left %v in the folder", dataDir, entries)
				}
			}
		})
	}

	// accounts create starts a database where there is none, and says where; then the read commands
	// find it.
	dir := t.TempDir()
	out, stderr, code := run(t, dir, nil, "accounts", "create", "--email", "you@example.com", "--password", "lighthouse-keeper-1848")
	if code != 0 || !strings.Contains(stderr, "no database at "+filepath.Join(dir, "data", "videogen.db")+" yet: creating it") {
		t.Fatalf("accounts create in an empty folder: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := run(t, dir, nil, "wallet", "balance", "--email", "you@example.com"); code != 0 || !strings.Contains(out, "available 0.000000 USD") {
		t.Fatalf("wallet balance beside the new database: exit %d\n%s%s", code, out, stderr)
	}
}

// TestHintsNameTheBinaryAsInvoked: a command a message tells the user to run names this program as it
// was run, here ./bin/videogen, so it can be pasted back as it is.
func TestHintsNameTheBinaryAsInvoked(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, filepath.Join(dir, "bin", "videogen")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("./bin/videogen", "generate", "--model", "videogen-2.0-720p", "--prompt", "a kite")
	cmd.Dir, cmd.Env = dir, environ(nil)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "(or with `./bin/videogen keys create --email …`)") {
		t.Fatalf("generate without a key: %v\n%s", err, &stderr)
	}
}
