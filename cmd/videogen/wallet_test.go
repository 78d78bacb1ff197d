package main_test

import (
	"html"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/testkit"
)

// TestCLIWalletAdjustmentIsAudited: `videogen wallet credit` is the staff console's adjustment from the
// command line. It needs a reason; the audit log shows it with actor cli, the amount and the reason, as an
// admin reads it at /support/audit; a debit that would take the balance below zero is refused, saying
// so, unless --allow-negative says that is meant.
func TestCLIWalletAdjustmentIsAudited(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		addr := testkit.FreeAddr(t)
		base := "http://" + addr
		env := map[string]string{"DATABASE_URL": dbURL, "ADDR": addr, "PUBLIC_BASE_URL": base, "WORKERS": "false"}
		for _, args := range [][]string{
			{"accounts", "create", "--email", "q@x.io"},
			{"accounts", "create", "--email", "boss@example.com", "--password", "lighthouse-keeper-1850", "--role", "admin"},
		} {
			if out, stderr, code := run(t, dir, env, args...); code != 0 {
				t.Fatalf("%v: %d %q %q", args, code, out, stderr)
			}
		}

		// The probe's command: a debit of a fresh account, without a word about going below zero.
		out, stderr, code := run(t, dir, env, "wallet", "credit", "--email", "q@x.io", "--usd", "-5", "--reason", "t")
		if code == 0 || out != "" || !strings.Contains(stderr, "below zero") || !strings.Contains(stderr, "--allow-negative") {
			t.Fatalf("a debit below zero without the flag: exit %d, stdout %q, stderr %q", code, out, stderr)
		}
		if out, _, _ := run(t, dir, env, "wallet", "balance", "--email", "q@x.io"); !strings.Contains(out, "available 0.000000 USD") {
			t.Fatalf("the refused debit moved the balance: %q", out)
		}
		if out, stderr, code := run(t, dir, env, "wallet", "credit", "--email", "q@x.io", "--usd", "12.50", "--reason", "welcome credit, ticket 42"); code != 0 ||
			!strings.Contains(out, "available 12.500000 USD") {
			t.Fatalf("credit: %d %q %q", code, out, stderr)
		}
		if out, stderr, code := run(t, dir, env, "wallet", "credit", "--email", "q@x.io", "--usd", "-20", "--reason", "chargeback, ticket 43", "--allow-negative"); code != 0 ||
			!strings.Contains(out, "available -7.500000 USD") {
			t.Fatalf("a debit below zero with --allow-negative: %d %q %q", code, out, stderr)
		}

		// An admin reads both in the audit log, with actor cli, amount and reason.
		serve(t, dir, env)
		boss := newBrowser(t)
		boss.get(base + "/signin")
		if status, _ := boss.post(base+"/signin", url.Values{"email": {"boss@example.com"}, "password": {"lighthouse-keeper-1850"}}); status != 303 {
			t.Fatalf("sign-in: %d", status)
		}
		_, setup := boss.get(base + "/support/2fa/setup")
		secret := totpSecretOf(t, setup)
		totpCode, _ := totp.GenerateCode(secret, time.Now())
		if status, _ := boss.post(base+"/support/2fa/setup", url.Values{"code": {totpCode}}); status != 200 {
			t.Fatalf("enrolment: %d", status)
		}
		status, page := boss.get(base + "/support/audit?actor=cli")
		if status != 200 {
			t.Fatalf("the audit log: %d", status)
		}
		page = html.UnescapeString(page)
		for _, want := range []string{"balance.credit", "balance.debit", "welcome credit, ticket 42", "chargeback, ticket 43", "+$12.50", "-$20.00"} {
			if !strings.Contains(page, want) {
				t.Errorf("the audit log of actor cli lacks %q", want)
			}
		}
	})
}
