package handlers_test

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"image/png"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/domain/audit"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// The staff page every 2FA test tries to reach. The staff pages themselves are written elsewhere: any
// answer but the second factor's redirect (303) means the session got past the gate.
// (The search matches no address: one match would be a redirect too.)
const gatedPage = "/support/search?q=no-such-user"

var qrRE = regexp.MustCompile(`<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"[^>]*alt="QR code[^"]*"`)

// pastGate reports whether the browser's session opens staff pages; when it does not, the redirect
// must be to the second factor's pages.
func pastGate(t *testing.T, b *browser) bool {
	t.Helper()
	p := b.get(gatedPage)
	if p.Status != 303 {
		return true
	}
	if !strings.HasPrefix(p.location(), "/support/2fa") {
		t.Fatalf("the staff page redirects to %q, not to the second factor", p.location())
	}
	return false
}

// signInAgain signs a staff member in from a new browser, asking for gatedPage; it returns the browser.
func signInAgain(t *testing.T, s *testkit.Server, email string) *browser {
	t.Helper()
	b := newBrowser(t, s)
	p := b.post("/signin", "/signin", url.Values{"email": {email}, "password": {"paper-boats-float-42"}, "next": {gatedPage}})
	if p.Status != 303 || p.location() != gatedPage {
		t.Fatalf("sign-in: %d %q", p.Status, p.location())
	}
	return b
}

// enterCode sends the code form of the second factor's page, reached as the gate sends a person there.
func enterCode(t *testing.T, b *browser, code string) *page {
	t.Helper()
	return b.submit("/support/2fa?next="+url.QueryEscape(gatedPage), "code", url.Values{"code": {code}})
}

// codeIn is the authenticator's code of the next time step: the one of now may be the step enrolment
// just spent, and the server accepts one step either side.
func codeIn(t *testing.T, secret string) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func audited(t *testing.T, s *testkit.Server, email, action string) int64 {
	t.Helper()
	var n int64
	if err := s.DB.R.Model(&models.AuditEntry{}).Where("actor = ? AND action = ? AND target_type = ?", email, action, audit.TargetUser).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// Test2FAEnrolment: a staff member without a second factor sees no staff page until they set one up:
// a QR code and the same key as text, a wrong code refused, a right one showing ten recovery codes.
func Test2FAEnrolment(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		b := signUpVerified(t, s, "eve@example.com")
		if err := s.DB.W.Model(&models.User{}).Where("email = ?", "eve@example.com").Update("role", models.RoleSupport).Error; err != nil {
			t.Fatal(err)
		}
		next := url.QueryEscape(gatedPage)
		for _, path := range []string{gatedPage, "/support/2fa?next=" + next} {
			if p := b.get(path); p.Status != 303 || p.location() != "/support/2fa/setup?next="+next {
				t.Fatalf("GET %s before enrolment: %d %q", path, p.Status, p.location())
			}
		}

		setupURL := "/support/2fa/setup?next=" + next
		setup := b.get(setupURL)
		if setup.Status != 200 {
			t.Fatalf("setup page: %d", setup.Status)
		}
		secret := totpSecretRE.FindStringSubmatch(setup.Body)
		qr := qrRE.FindStringSubmatch(setup.Body)
		if secret == nil || qr == nil {
			t.Fatalf("the setup page lacks the QR code or the key:\n%s", trimPage(setup.Body))
		}
		img, err := base64.StdEncoding.DecodeString(qr[1])
		if err != nil {
			t.Fatal(err)
		}
		if m, err := png.Decode(bytes.NewReader(img)); err != nil || m.Bounds().Dx() < 100 {
			t.Fatalf("the QR code is not a PNG image: %v", err)
		}
		key := totpKey(secret[1])
		// The key is printed once, in groups of four for reading (each its own element, so that copying
		// it gives the key without spaces).
		setup.contains(t, "authenticator app", "6-digit code", "<span>"+key[:4]+"</span><span>"+key[4:8]+"</span>")
		shown := visibleText(setup.Body)
		if n, groups := strings.Count(shown, key), strings.Count(shown, key[:4]); n != 1 || groups != 1 || len(key) != 32 {
			t.Fatalf("the setup page shows the %d-character key %d times and its first group %d times, want once each", len(key), n, groups)
		}
		if again := totpSecretRE.FindStringSubmatch(b.get(setupURL).Body); again == nil || totpKey(again[1]) != key {
			t.Fatal("reloading the setup page changed the key")
		}

		var row models.User
		s.DB.R.Where("email = ?", "eve@example.com").Take(&row)
		raw, _ := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(key)
		if len(row.TOTPSealed) == 0 || bytes.Contains(row.TOTPSealed, raw) || bytes.Contains(row.TOTPSealed, []byte(key)) || row.TOTPEnabledAt != nil {
			t.Fatalf("users.totp_sealed: %d bytes, holds the key in the clear or is enabled too soon", len(row.TOTPSealed))
		}

		for _, bad := range []string{"000000", "12345", "not a code"} {
			p := b.submit(setupURL, "code", url.Values{"code": {bad}})
			if p.Status != 422 || p.Posted != "/support/2fa/setup" {
				t.Fatalf("a wrong code %q: %d posted to %s", bad, p.Status, p.Posted)
			}
			p.contains(t, "This code does not work", `aria-invalid="true"`)
			if m := totpSecretRE.FindStringSubmatch(p.Body); m == nil || totpKey(m[1]) != key || strings.Count(visibleText(p.Body), key) != 1 {
				t.Fatalf("after a wrong code the page does not show the same key once:\n%s", trimPage(p.Body))
			}
		}
		if pastGate(t, b) {
			t.Fatal("a wrong code opened the staff pages")
		}

		p := b.submit(setupURL, "code", url.Values{"code": {totpCode(t, key)}})
		if p.Status != 200 {
			t.Fatalf("a right code: %d %s", p.Status, trimPage(p.Body))
		}
		codes := recoveryCodeRE.FindAllStringSubmatch(p.Body, -1)
		if len(codes) != 10 {
			t.Fatalf("%d recovery codes shown", len(codes))
		}
		p.contains(t, "Store these somewhere safe", "each works once", "they are not shown again", `href="`+gatedPage+`"`)
		if !pastGate(t, b) {
			t.Fatal("after enrolment the session still cannot open staff pages")
		}
		if p := b.get(setupURL); p.Status != 303 || !strings.HasPrefix(p.location(), "/support/2fa?") {
			t.Fatalf("the setup page once enrolled: %d %q", p.Status, p.location())
		}
		// Sending the form again (a reload) shows nothing more.
		if p := b.postRaw("/support/2fa/setup", url.Values{"code": {totpCode(t, key)}, "_csrf": {csrfRE.FindStringSubmatch(setup.Body)[1]}}); p.Status != 303 || strings.Contains(p.Body, codes[0][1]) {
			t.Fatalf("the enrolment form sent again: %d", p.Status)
		}
		b.get("/support/2fa").contains(t, "10 recovery codes left", "Make new recovery codes")

		var stored []models.RecoveryCode
		s.DB.R.Where("user_id = ?", row.ID).Find(&stored)
		if len(stored) != 10 {
			t.Fatalf("%d recovery codes stored", len(stored))
		}
		for _, r := range stored {
			for _, c := range codes {
				if strings.Contains(r.CodeHash, c[1]) || strings.Contains(r.CodeHash, strings.ReplaceAll(c[1], "-", "")) {
					t.Fatalf("recovery code %s is stored in the clear", c[1])
				}
			}
		}
		if n := audited(t, s, "eve@example.com", audit.EnrolTOTP); n != 1 {
			t.Fatalf("%d enrolments in the audit log", n)
		}
	})
}

// Test2FAOnEverySignIn: signing in again starts a session that has not passed; the authenticator's code
// passes it and goes on to the page asked for; the same code does not pass another session.
func Test2FAOnEverySignIn(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		st := signInStaff(t, s, "sup@example.com", models.RoleSupport)
		if !pastGate(t, st.browser) {
			t.Fatal("signInStaff's session cannot open staff pages")
		}
		if p := st.post("/support/2fa", "/signout", url.Values{}); p.Status != 303 {
			t.Fatalf("sign-out: %d", p.Status)
		}

		b := signInAgain(t, s, st.Email)
		if p := b.get(gatedPage); p.Status != 303 || p.location() != "/support/2fa?next="+url.QueryEscape(gatedPage) {
			t.Fatalf("a new session opened %s: %d %q", gatedPage, p.Status, p.location())
		}
		form := b.get("/support/2fa?next=" + url.QueryEscape(gatedPage))
		form.contains(t, "authenticator app", "recovery codes", `name="next" value="`+gatedPage+`"`)

		wrong := enterCode(t, b, "000000")
		if wrong.Status != 422 {
			t.Fatalf("a wrong code: %d", wrong.Status)
		}
		wrong.contains(t, "This code does not work")
		if pastGate(t, b) {
			t.Fatal("a wrong code opened the staff pages")
		}

		code := codeIn(t, st.Secret)
		if p := enterCode(t, b, code); p.Status != 303 || p.location() != gatedPage {
			t.Fatalf("the right code: %d %q %s", p.Status, p.location(), trimPage(p.Body))
		}
		if !pastGate(t, b) {
			t.Fatal("the right code did not open the staff pages")
		}

		// The same code, from another browser: a code is good once.
		c := signInAgain(t, s, st.Email)
		if p := enterCode(t, c, code); p.Status != 422 {
			t.Fatalf("a replayed code: %d %q", p.Status, p.location())
		}
		if pastGate(t, c) {
			t.Fatal("a replayed code opened the staff pages")
		}
		if n := audited(t, s, st.Email, audit.SecondFactor); n != 1 {
			t.Fatalf("%d passes in the audit log, want 1", n)
		}
	})
}

// Test2FARecoveryCodes: a recovery code passes once; new codes replace the unused ones, and only a
// session past the second factor may ask for them.
func Test2FARecoveryCodes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		st := signInStaff(t, s, "kim@example.com", models.RoleAdmin)

		b := signInAgain(t, s, st.Email)
		if p := enterCode(t, b, st.Recovery[0]); p.Status != 303 || p.location() != gatedPage {
			t.Fatalf("a recovery code: %d %q", p.Status, p.location())
		}
		if !pastGate(t, b) {
			t.Fatal("a recovery code did not open the staff pages")
		}
		c := signInAgain(t, s, st.Email)
		for _, tc := range []struct {
			name, code string
			status     int
		}{
			{"the same recovery code again", st.Recovery[0], 422},
			{"another one, in capitals and without its dash", strings.ToUpper(strings.ReplaceAll(st.Recovery[1], "-", "")), 303},
		} {
			if p := enterCode(t, c, tc.code); p.Status != tc.status {
				t.Fatalf("%s: %d", tc.name, p.Status)
			}
		}
		b.get("/support/2fa").contains(t, "8 recovery codes left")

		// A session that has not passed cannot replace the codes.
		d := signInAgain(t, s, st.Email)
		if p := d.post("/support/2fa", "/support/2fa/recovery-codes", url.Values{}); p.Status != 303 || !strings.HasPrefix(p.location(), "/support/2fa") {
			t.Fatalf("new codes without the second factor: %d %q", p.Status, p.location())
		}
		if n := audited(t, s, st.Email, audit.RecoveryReset); n != 0 {
			t.Fatal("the codes were replaced by a session that has not passed")
		}

		p := b.submit("/support/2fa", "", url.Values{})
		if p.Status != 200 || p.Posted != "/support/2fa/recovery-codes" {
			t.Fatalf("new codes: %d posted to %s", p.Status, p.Posted)
		}
		p.contains(t, "Store these somewhere safe", "each works once", "they are not shown again")
		var fresh []string
		for _, m := range recoveryCodeRE.FindAllStringSubmatch(p.Body, -1) {
			fresh = append(fresh, m[1])
		}
		if len(fresh) != 10 || fresh[0] == st.Recovery[0] {
			t.Fatalf("new codes: %q", fresh)
		}
		if p := enterCode(t, d, st.Recovery[2]); p.Status != 422 {
			t.Fatalf("an unused code from before the new ones: %d", p.Status)
		}
		if p := enterCode(t, d, fresh[0]); p.Status != 303 {
			t.Fatalf("a new code: %d", p.Status)
		}
		for action, want := range map[string]int64{audit.RecoveryUsed: 3, audit.RecoveryReset: 1, audit.SecondFactor: 3} {
			if n := audited(t, s, st.Email, action); n != want {
				t.Errorf("%d %s rows in the audit log, want %d", n, action, want)
			}
		}
	})
}

// Test2FAThrottled: after ten codes in a row, even the right one waits.
func Test2FAThrottled(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		st := signInStaff(t, s, "tom@example.com", models.RoleSupport)
		b := signInAgain(t, s, st.Email)
		for i := range 10 {
			if p := enterCode(t, b, "000000"); p.Status != 422 {
				t.Fatalf("wrong code %d: %d", i+1, p.Status)
			}
		}
		p := enterCode(t, b, codeIn(t, st.Secret))
		if p.Status != 429 || p.Header.Get("Retry-After") == "" {
			t.Fatalf("the 11th code: %d, Retry-After %q", p.Status, p.Header.Get("Retry-After"))
		}
		p.contains(t, "Too many codes were tried")
		if pastGate(t, b) {
			t.Fatal("a throttled code opened the staff pages")
		}
	})
}

// Test2FAHiddenFromMembers: the second factor's pages are staff pages: anyone else gets the 404 of an
// unknown path, forms included.
func Test2FAHiddenFromMembers(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		member := signUpVerified(t, s, "member@example.com")
		for _, path := range []string{"/support/2fa", "/support/2fa/setup"} {
			if p := member.get(path); p.Status != 404 {
				t.Errorf("GET %s: %d", path, p.Status)
			}
		}
		for _, path := range []string{"/support/2fa", "/support/2fa/setup", "/support/2fa/recovery-codes"} {
			if p := member.post("/console", path, url.Values{"code": {"123456"}}); p.Status != 404 {
				t.Errorf("POST %s: %d", path, p.Status)
			}
		}
		var u models.User
		s.DB.R.Where("email = ?", "member@example.com").Take(&u)
		if len(u.TOTPSealed) != 0 {
			t.Error("a member's visit made a TOTP secret")
		}
	})
}

// Test2FANextStaysUnderSupport: where the second factor leads on is a staff page of this site.
func Test2FANextStaysUnderSupport(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	st := signInStaff(t, s, "nia@example.com", models.RoleSupport)
	for _, tc := range []struct{ next, want string }{
		{"", "/support"},
		{"/support/accounts/7?tab=keys", "/support/accounts/7?tab=keys"},
		{"/support", "/support"},
		{"/console/keys", "/support"},
		{"/supportive", "/support"},
		{"//evil.example/support", "/support"},
		{"https://evil.example/support", "/support"},
		{"/support/../console", "/support"},
		{"/support/%2e%2e/console", "/support"},
	} {
		p := st.get("/support/2fa?next=" + url.QueryEscape(tc.next))
		if want := `<a class="button" href="` + strings.ReplaceAll(tc.want, "&", "&amp;") + `">`; !strings.Contains(p.Body, want) {
			t.Errorf("next %q: the page does not lead on to %q:\n%s", tc.next, tc.want, trimPage(p.Body))
		}
	}
}

// TestSecondFactorStrangersDoNotLockOutTheStaffMember: someone with a staff member's password tries codes
// from many networks until the ceiling holds them all. The staff member's own browser, which passed the
// second factor before, gets in on a network never seen (its device cookie), while a new stranger waits.
// The server's clock stands still, so no token comes back while the test counts them.
func TestSecondFactorStrangersDoNotLockOutTheStaffMember(t *testing.T) {
	frozen := time.Now()
	s := testkit.StartWith(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"},
		server.Options{Now: func() time.Time { return frozen }})
	st := signInStaff(t, s, "guarded@example.com", models.RoleSupport) // passed at enrolment, from 127.0.0.1
	stranger := func(i int) *page {
		b := newBrowser(t, s)
		b.ip = "203.0.113." + itoa(i+1)
		if p := b.post("/signin", "/signin", url.Values{"email": {"guarded@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 303 {
			t.Fatalf("stranger %d signing in with the password: %d", i+1, p.Status)
		}
		return enterCode(t, b, "000000")
	}
	for i := range 20 {
		if p := stranger(i); p.Status != 422 {
			t.Fatalf("stranger %d's code: %d", i+1, p.Status)
		}
	}
	if p := stranger(20); p.Status != 429 || p.Header.Get("Retry-After") == "" {
		t.Fatalf("a stranger's code past the ceiling: %d", p.Status)
	}
	// The staff member signs in again from a café: the browser is theirs, the network is new.
	if p := st.post("/console", "/signout", url.Values{}); p.Status != 303 {
		t.Fatalf("sign-out: %d", p.Status)
	}
	st.ip = "198.51.100.90"
	if p := st.post("/signin", "/signin", url.Values{"email": {"guarded@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 303 {
		t.Fatalf("the staff member signing in: %d", p.Status)
	}
	if p := enterCode(t, st.browser, st.Recovery[0]); p.Status != 303 || p.location() != gatedPage {
		t.Fatalf("the staff member's own browser during the guessing: %d %q, want 303 to the page", p.Status, p.location())
	}
}
