package main_test

import (
	"strings"
	"testing"

	"videogen/internal/testkit"
)

// TestCLIListsAndVersion: `--version` answers; an unknown subcommand exits non-zero; `accounts create
// --staff-role` names the staff role (none, support, admin); `keys list` and `accounts list` show what
// there is (a revoked key as revoked, never a secret); `members --email` is `members list --email`.
func TestCLIListsAndVersion(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"DATABASE_URL": testkit.SQLiteURL(t)}
	must := func(args ...string) string {
		t.Helper()
		out, stderr, code := run(t, dir, env, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr)
		}
		return out
	}
	if out := must("--version"); !strings.HasPrefix(out, "videogen version ") {
		t.Fatalf("--version: %q", out)
	}
	if _, stderr, code := run(t, dir, env, "acounts", "list"); code == 0 || !strings.Contains(stderr, `unknown command "acounts"`) {
		t.Fatalf("an unknown subcommand: exit %d, %q", code, stderr)
	}
	must("accounts", "create", "--email", "owner@example.com", "--password", "lighthouse-keeper-1851", "--staff-role", "none")
	must("accounts", "create", "--email", "helper@example.com", "--password", "lighthouse-keeper-1852", "--staff-role", "support")
	if _, stderr, code := run(t, dir, env, "accounts", "create", "--email", "x@example.com", "--staff-role", "owner"); code == 0 || !strings.Contains(stderr, "role must be") {
		t.Fatalf("an account role given as the staff role: exit %d, %q", code, stderr)
	}
	secret := strings.TrimSpace(must("keys", "create", "--email", "owner@example.com", "--name", "laptop"))
	must("keys", "create", "--email", "owner@example.com", "--name", "server", "--spend-limit-usd", "5", "--limit-period", "day")
	must("keys", "revoke", "--prefix", secret[:11])
	keys := must("keys", "list", "--email", "owner@example.com")
	for _, want := range []string{"2 keys", secret[:11], "laptop", "revoked", "server", "$5.00/day", "active"} {
		if !strings.Contains(keys, want) {
			t.Errorf("keys list lacks %q:\n%s", want, keys)
		}
	}
	if strings.Contains(keys, secret) {
		t.Fatal("keys list shows a secret")
	}
	accounts := must("accounts", "list")
	for _, want := range []string{"owner@example.com", "helper@example.com", "$0.00", "active"} {
		if !strings.Contains(accounts, want) {
			t.Errorf("accounts list lacks %q:\n%s", want, accounts)
		}
	}
	if out, stderr, code := run(t, dir, env, "wallet", "credit", "--email", "owner@example.com", "--usd", "1.005", "--reason", "typo"); code == 0 || out != "" || !strings.Contains(stderr, "whole cents (e.g. $1.00)") {
		t.Fatalf("a credit of $1.005: exit %d, %q %q", code, out, stderr)
	}
	if out := must("wallet", "balance", "--email", "owner@example.com"); !strings.Contains(out, "available 0.000000 USD") {
		t.Fatalf("the refused credit moved the balance: %s", out)
	}
	must("wallet", "credit", "--email", "owner@example.com", "--usd", "2.50", "--reason", "ticket 4711", "--customer-note", "Sorry for the outage")
	if a, b := must("members", "--email", "owner@example.com"), must("members", "list", "--email", "owner@example.com"); a != b || !strings.Contains(a, "owner@example.com") {
		t.Fatalf("members --email:\n%s\nmembers list --email:\n%s", a, b)
	}
}
