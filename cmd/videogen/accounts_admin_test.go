package main_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCLIAdminActions: `videogen accounts role|disable|enable` change roles and accounts on a database a
// server is running on, each with an audit row whose actor is cli; disabling refuses the account's key
// on the running server (401 account_disabled within API_KEY_CACHE_TTL), signs its user out and keeps
// them out, fails its waiting task with its reservation released, and leaves the books consistent;
// enabling lets the key in again. The last admin cannot be demoted, and bad input exits non-zero with
// nothing on stdout.
func TestCLIAdminActions(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		addr := testkit.FreeAddr(t)
		base := "http://" + addr
		// No workers: the task stays waiting for an upstream slot, as a busy platform's would.
		env := map[string]string{"DATABASE_URL": dbURL, "ADDR": addr, "PUBLIC_BASE_URL": base, "WORKERS": "false"}
		for _, args := range [][]string{
			{"accounts", "create", "--email", "ada@example.com", "--password", "correct horse battery", "--role", "admin"},
			{"accounts", "create", "--email", "bob@example.com", "--password", "lighthouse-keeper-1848"},
			{"accounts", "create", "--email", "carol@example.com", "--password", "lighthouse-keeper-1849"},
			{"wallet", "credit", "--email", "bob@example.com", "--usd", "10", "--reason", "start"},
		} {
			if out, stderr, code := run(t, dir, env, args...); code != 0 {
				t.Fatalf("%v: %d %q %q", args, code, out, stderr)
			}
		}
		key, stderr, code := run(t, dir, env, "keys", "create", "--email", "bob@example.com")
		key = strings.TrimSpace(key)
		if code != 0 {
			t.Fatalf("keys create: %d %q", code, stderr)
		}
		serve(t, dir, env)
		r := testkit.Do(t, base, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-720p", "prompt": "waits for a slot"})
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		taskID := r.JSON(t)["id"].(string)
		bob := newBrowser(t)
		bob.get(base + "/signin")
		if status, _ := bob.post(base+"/signin", url.Values{"email": {"bob@example.com"}, "password": {"lighthouse-keeper-1848"}}); status != 303 {
			t.Fatalf("bob's sign-in: %d", status)
		}

		ok := func(want string, args ...string) {
			t.Helper()
			out, stderr, code := run(t, dir, env, args...)
			if code != 0 || !strings.Contains(out, want) || strings.Count(out, "\n") != 1 {
				t.Fatalf("%v: exit %d, stdout %q, stderr %q; want one line with %q", args, code, out, stderr, want)
			}
		}
		fails := func(want string, args ...string) {
			t.Helper()
			out, stderr, code := run(t, dir, env, args...)
			if code == 0 || out != "" || !strings.Contains(strings.ToLower(stderr), want) {
				t.Fatalf("%v: exit %d, stdout %q, stderr %q; want a non-zero exit and %q", args, code, out, stderr, want)
			}
		}

		ok("carol@example.com is now support (was member)", "accounts", "role", "--email", "carol@example.com", "--role", "support")
		ok("already support", "accounts", "role", "--email", "carol@example.com", "--role", "support")
		fails("only admin", "accounts", "role", "--email", "ada@example.com", "--role", "member")
		fails("role must be", "accounts", "role", "--email", "carol@example.com", "--role", "root")
		fails("no user", "accounts", "role", "--email", "nobody@example.com", "--role", "admin")
		fails("staff users", "accounts", "disable", "--email", "carol@example.com", "--reason", "a staff account")
		fails("reason", "accounts", "disable", "--email", "bob@example.com", "--reason", "  ")
		fails("reason", "accounts", "disable", "--email", "bob@example.com")
		fails("not disabled", "accounts", "enable", "--email", "bob@example.com", "--reason", "nothing to do")

		ok("1 keys refused, 1 sessions ended, 1 waiting tasks failed and $1.20 released, 0 tasks already sent upstream will finish",
			"accounts", "disable", "--email", "bob@example.com", "--reason", "card fraud reported by the bank")
		fails("already disabled", "accounts", "disable", "--email", "bob@example.com", "--reason", "twice")

		// The running server refuses the key once its cache entry expires (API_KEY_CACHE_TTL, 2 s).
		waitCode := func(want string) {
			t.Helper()
			var r *testkit.Resp
			testkit.Eventually(t, 5*time.Second, fmt.Sprintf("GET /v1/models answers %q once the key cache forgets the key", want), func() bool {
				r = testkit.Do(t, base, "GET", "/v1/models", key, nil)
				return (want == "" && r.Status == 200) || (want != "" && r.ErrorCode() == want)
			}, func() string { return fmt.Sprintf("last: %d %s", r.Status, r.Body) })
			if want != "" && (r.Status != 401 || !strings.Contains(string(r.Body), "Contact support")) {
				t.Fatalf("disabled key: %d %s", r.Status, r.Body)
			}
		}
		waitCode("account_disabled")
		if status, _ := bob.get(base + "/console"); status != 303 {
			t.Fatalf("bob's console after the disable: %d, want a redirect to sign in", status)
		}
		bob.get(base + "/signin")
		if status, _ := bob.post(base+"/signin", url.Values{"email": {"bob@example.com"}, "password": {"lighthouse-keeper-1848"}}); status != 403 {
			t.Fatalf("bob's sign-in to a disabled account: %d, want 403", status)
		}

		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		task := testkit.Task(t, d, taskID)
		if task.Status != "failed" || task.BillingState != "released" || task.ErrorCode == nil || *task.ErrorCode != "account_disabled" {
			t.Fatalf("the waiting task after the disable: %s %s %v", task.Status, task.BillingState, task.ErrorCode)
		}
		if kinds := testkit.Kinds(testkit.Entries(t, d, taskID)); strings.Join(kinds, ",") != "reserve,release" {
			t.Fatalf("the waiting task's entries: %v", kinds)
		}
		testkit.CheckLedger(t, d)

		ok("enabled account", "accounts", "enable", "--email", "bob@example.com", "--reason", "the bank withdrew the report")
		waitCode("")
		bob.get(base + "/signin")
		if status, _ := bob.post(base+"/signin", url.Values{"email": {"bob@example.com"}, "password": {"lighthouse-keeper-1848"}}); status != 303 {
			t.Fatalf("bob's sign-in once enabled again: %d", status)
		}

		var rows []models.AuditEntry
		d.R.Where("actor = ?", "cli").Order("id").Find(&rows)
		var bobAcct models.User
		d.R.Where("email = ?", "bob@example.com").Take(&bobAcct)
		want := []struct{ action, target, reason string }{
			{"balance.credit", "account", "start"}, // wallet credit is the console's audited adjustment
			{"role.set", "user", ""},
			{"account.disable", "account", "card fraud reported by the bank"},
			{"account.enable", "account", "the bank withdrew the report"},
		}
		if len(rows) != len(want) {
			t.Fatalf("%d audit rows by cli, want %d: %+v", len(rows), len(want), rows)
		}
		for i, w := range want {
			if g := rows[i]; g.Action != w.action || g.TargetType != w.target || g.Reason != w.reason || g.ActorUserID != nil {
				t.Errorf("audit row %d: %+v, want %+v", i, g, w)
			}
		}
		if rows[1].Detail != "carol@example.com: member → support" || rows[2].AccountID == nil || *rows[2].AccountID != bobAcct.AccountID ||
			!strings.Contains(rows[2].Detail, "1 waiting tasks failed and $1.20 released") {
			t.Errorf("audit details: %q %v %q", rows[1].Detail, rows[2].AccountID, rows[2].Detail)
		}
	})
}
