package main_test

import (
	"context"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCLIResetSecondFactor: `videogen accounts reset-2fa` is the way back for a staff member who lost
// both their authenticator and their recovery codes: it forgets both, signs them out, records an audit
// row with actor cli, and their next staff page asks them to enrol again.
func TestCLIResetSecondFactor(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		addr := testkit.FreeAddr(t)
		base := "http://" + addr
		env := map[string]string{"DATABASE_URL": dbURL, "ADDR": addr, "PUBLIC_BASE_URL": base, "WORKERS": "false"}
		if out, stderr, code := run(t, dir, env, "accounts", "create", "--email", "sam@example.com", "--password", "lighthouse-keeper-1850", "--role", "support"); code != 0 {
			t.Fatalf("create: %d %q %q", code, out, stderr)
		}
		serve(t, dir, env)
		sam := newBrowser(t)
		sam.get(base + "/signin")
		if status, _ := sam.post(base+"/signin", url.Values{"email": {"sam@example.com"}, "password": {"lighthouse-keeper-1850"}}); status != 303 {
			t.Fatalf("sign-in: %d", status)
		}
		_, setup := sam.get(base + "/support/2fa/setup")
		secret := totpSecretOf(t, setup)
		code, _ := totp.GenerateCode(secret, time.Now())
		if status, _ := sam.post(base+"/support/2fa/setup", url.Values{"code": {code}}); status != 200 {
			t.Fatalf("enrolment: %d", status)
		}
		if status, _ := sam.get(base + "/support/search"); status != 200 {
			t.Fatalf("after enrolment the staff pages answer %d", status)
		}

		if out, stderr, code := run(t, dir, env, "accounts", "reset-2fa", "--email", "sam@example.com"); code == 0 || out != "" {
			t.Fatalf("without a reason: exit %d %q %q", code, out, stderr)
		}
		out, stderr, exit := run(t, dir, env, "accounts", "reset-2fa", "--email", "sam@example.com", "--reason", "lost phone, verified by video call")
		if exit != 0 || !strings.Contains(out, "no second factor now") {
			t.Fatalf("reset-2fa: %d %q %q", exit, out, stderr)
		}
		// Signed out: the old session no longer opens staff pages; signing in again leads to enrolment.
		if status, loc := sam.get(base + "/support/search"); status != 404 {
			t.Fatalf("the old session after the reset: %d %s", status, loc)
		}
		sam.get(base + "/signin")
		sam.post(base+"/signin", url.Values{"email": {"sam@example.com"}, "password": {"lighthouse-keeper-1850"}})
		resp, err := sam.c.Get(base + "/support/search")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != 303 || !strings.HasPrefix(loc, "/support/2fa/setup") {
			t.Fatalf("after the reset a staff page answers %d → %q, want enrolment", resp.StatusCode, loc)
		}
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var row models.AuditEntry
		if err := d.R.Where("action = ?", "2fa.reset").Take(&row).Error; err != nil || row.Actor != "cli" || row.Reason != "lost phone, verified by video call" {
			t.Fatalf("audit row %+v: %v", row, err)
		}
		var codes int64
		d.R.Model(&models.RecoveryCode{}).Where("used_at IS NULL").Count(&codes)
		if codes != 0 {
			t.Errorf("%d recovery codes still usable", codes)
		}
	})
}

// totpSecretOf reads the key the staff enrolment page prints once, in groups of four (one element each).
func totpSecretOf(t *testing.T, page string) string {
	t.Helper()
	m := regexp.MustCompile(`id="totp-secret"[^>]*>((?:\s*<span>[A-Z2-7]+</span>)+)\s*</code>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no secret on the enrolment page")
	}
	return strings.Join(regexp.MustCompile(`[A-Z2-7]+`).FindAllString(m[1], -1), "")
}
