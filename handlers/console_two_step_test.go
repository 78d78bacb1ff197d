package handlers_test

import (
	"html"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/testkit"
)

// enrolConsoleTOTP sets up a member's authenticator through the console's pages, as a person typing the
// key would, and returns the key.
func enrolConsoleTOTP(t *testing.T, b *browser) string {
	t.Helper()
	setup := b.get("/console/2fa/setup")
	m := totpSecretRE.FindStringSubmatch(setup.Body)
	if setup.Status != 200 || m == nil {
		t.Fatalf("the console's enrolment page shows no key: %d %s", setup.Status, trimPage(setup.Body))
	}
	secret := totpKey(m[1])
	p := b.submit("/console/2fa/setup", "code", url.Values{"code": {totpCode(t, secret)}})
	if p.Status != 200 || len(recoveryCodeRE.FindAllStringSubmatch(p.Body, -1)) != 10 {
		t.Fatalf("enrolling: %d %s", p.Status, trimPage(p.Body))
	}
	return secret
}

// nextStepCode is the authenticator's code of the next 30-second step: a code is good once, and the
// enrolment spent the current one (the server accepts one step of drift).
func nextStepCode(t *testing.T, secret string) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, time.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestConsoleTwoStep: any member sets up two-step sign-in (QR, the key as text, recovery codes); signing
// in then asks for a code only after the password is right, before any console page, and comes back to
// the page asked for; wrong codes are refused and, as for passwords, too many lock the member out for a
// while; an owner can require it of every member, who is then sent to set it up; the members page shows
// who has it; other roles cannot change the requirement.
func TestConsoleTwoStep(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		const email, password = "tess@example.com", "paper-boats-float-42"
		owner := signUpVerified(t, s, email)
		owner.get("/console/account").contains(t, `id="two-step-state"><span class="badge">off</span>`, `href="/console/2fa/setup?next=%2Fconsole%2Faccount"`)
		secret := enrolConsoleTOTP(t, owner)
		owner.get("/console/account").contains(t, `<span class="badge completed">on</span>`)
		owner.get("/console/2fa").contains(t, "This browser passed the second step", "10 recovery codes")

		// A new browser: a wrong password asks for no code; the right one does, before any page.
		b := newBrowser(t, s)
		if p := b.post("/signin", "/signin", url.Values{"email": {email}, "password": {"not-the-password-1"}}); p.Status == 303 || strings.Contains(p.Body, "sign-in code") {
			t.Fatalf("a wrong password: %d", p.Status)
		}
		if p := b.post("/signin", "/signin?next=%2Fconsole%2Fusage", url.Values{"email": {email}, "password": {password}, "next": {"/console/usage"}}); p.Status != 303 {
			t.Fatalf("sign in: %d %s", p.Status, trimPage(p.Body))
		}
		for _, path := range []string{"/console", "/console/usage", "/console/keys"} {
			if p := b.get(path); p.Status != 303 || !strings.HasPrefix(p.location(), "/console/2fa?next=") {
				t.Fatalf("%s before the code: %d → %q", path, p.Status, p.location())
			}
		}
		ask := b.get("/console/2fa?next=%2Fconsole%2Fusage")
		ask.contains(t, "Enter your sign-in code", "Your password was right.", `value="/console/usage"`)
		if p := b.submit("/console/2fa?next=%2Fconsole%2Fusage", "code", url.Values{"code": {"000000"}}); p.Status != 422 || !strings.Contains(p.Body, "This code does not work") {
			t.Fatalf("a wrong code: %d", p.Status)
		}
		p := b.submit("/console/2fa?next=%2Fconsole%2Fusage", "code", url.Values{"code": {nextStepCode(t, secret)}})
		if p.Status != 303 || p.location() != "/console/usage" {
			t.Fatalf("the right code: %d → %q", p.Status, p.location())
		}
		if p := b.get("/console/usage"); p.Status != 200 {
			t.Fatalf("the page after the code: %d", p.Status)
		}

		// Guessing: the sign-in's lockout applies to codes too.
		c := newBrowser(t, s)
		c.post("/signin", "/signin", url.Values{"email": {email}, "password": {password}})
		locked := false
		for i := 0; i < 12 && !locked; i++ {
			p := c.submit("/console/2fa", "code", url.Values{"code": {"123456"}})
			switch p.Status {
			case 422:
			case 429:
				locked = true
				if !strings.Contains(p.Body, "Too many codes were tried") || p.Header.Get("Retry-After") == "" {
					t.Fatalf("the lockout: %s", trimPage(p.Body))
				}
			default:
				t.Fatalf("guess %d: %d", i, p.Status)
			}
		}
		if !locked {
			t.Fatal("12 wrong codes in a row were all answered")
		}
		// Locked out, even the right code is refused; the first browser, which passed, is untouched.
		if p := c.submit("/console/2fa", "code", url.Values{"code": {nextStepCode(t, secret)}}); p.Status != 429 {
			t.Fatalf("the right code while locked out: %d", p.Status)
		}
		if p := b.get("/console/usage"); p.Status != 200 {
			t.Fatalf("the browser that passed, during another's lockout: %d", p.Status)
		}

		// The owner requires it; a developer without it is sent to set it up, then gets in.
		link := invite(t, s, owner, "dev@example.com", "developer")
		dev := join(t, s, link)
		owner.get("/console/members").contains(t, `<span class="two-step on">two-step sign-in</span>`, `<span class="two-step off">password only</span>`)
		if p := owner.submit("/console/account", "require", url.Values{"require": {"yes"}}); p.Status != 303 || p.location() != "/console/account?notice=two-step-required" {
			t.Fatalf("require: %d %q", p.Status, p.location())
		}
		if p := dev.get("/console/tasks"); p.Status != 303 || p.location() != "/console/2fa/setup?next=%2Fconsole%2Ftasks" {
			t.Fatalf("a member without it, once required: %d → %q", p.Status, p.location())
		}
		dev.get("/console/2fa/setup").contains(t, "Your account requires two-step sign-in of every member")
		enrolConsoleTOTP(t, dev)
		if p := dev.get("/console/tasks"); p.Status != 200 {
			t.Fatalf("after setting it up: %d", p.Status)
		}
		// Only an owner changes the requirement.
		page := dev.get("/console/account")
		page.contains(t, "Your account requires two-step sign-in of every member.")
		page.lacks(t, `name="require"`)
		if p := dev.postRaw("/console/account", url.Values{"_csrf": {html.UnescapeString(csrfOf(t, dev, "/console/account"))}, "form": {"two-step"}}); p.Status != 403 || !strings.Contains(p.Body, "Your role (developer) cannot require two-step sign-in") {
			t.Fatalf("a developer lifting the requirement: %d %s", p.Status, trimPage(p.Body))
		}
	})
}
