package handlers_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"videogen/internal/domain/auth"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

func TestSignUpAndVerification(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := newBrowser(t, s)

		// Each rule answers next to its field, keeps the typed address, never echoes the password.
		for _, tc := range []struct {
			name, email, password, terms, field, msg string
		}{
			{"not an address", "not-an-email", "paper-boats-float-42", "yes", "email", "Enter an e-mail address"},
			{"address over 254 characters", strings.Repeat("a", 250) + "@example.com", "paper-boats-float-42", "yes", "email", "Enter an e-mail address"},
			{"short password", "a@example.com", "short", "yes", "password", "at least 10 characters"},
			{"common password", "a@example.com", "password123", "yes", "password", "most common"},
			{"address in password", "lighthouse@example.com", "my-lighthouse-2026", "yes", "password", "e-mail address"},
			{"one repeated character", "a@example.com", "aaaaaaaaaaaa", "yes", "password", "single repeated character"},
			{"terms not accepted", "a@example.com", "paper-boats-float-42", "", "terms", "Accept the terms"},
		} {
			p := b.post("/signup", "/signup", url.Values{"email": {tc.email}, "password": {tc.password}, "terms": {tc.terms}})
			if p.Status != 422 {
				t.Fatalf("%s: status %d", tc.name, p.Status)
			}
			p.contains(t, tc.msg)
			if !strings.Contains(p.Body, `id="`+tc.field+`-error"`) || !strings.Contains(p.Body, `aria-describedby="`+tc.field+`-error"`) {
				t.Fatalf("%s: the error is not next to the %s field", tc.name, tc.field)
			}
			if tc.email != "" && !strings.Contains(p.Body, `value="`+tc.email+`"`) {
				t.Fatalf("%s: the typed address was not kept", tc.name)
			}
			p.lacks(t, tc.password)
		}
		var users int64
		s.DB.R.Model(&models.User{}).Count(&users)
		if users != 0 {
			t.Fatalf("%d users created by refused forms", users)
		}

		// A good form: an unverified user with a verification e-mail.
		first := b.post("/signup", "/signup", url.Values{"email": {"Ada@Example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
		// This installation prints its e-mails (no RESEND_API_KEY): the page says where the link is.
		first.contains(t, "Check your inbox", `prints its e-mails to the server's log`)
		var u models.User
		s.DB.R.Where("email = ?", "ada@example.com").Take(&u)
		if u.ID == 0 || u.Verified() || u.TermsAcceptedAt == nil || u.PasswordHash == "" || strings.Contains(u.PasswordHash, "paper") {
			t.Fatalf("user %+v", u)
		}
		link := mailedLink(t, s, "ada@example.com")

		// The same address again: the very same answer, and only the owner learns of it.
		again := newBrowser(t, s).post("/signup", "/signup", url.Values{"email": {"ada@example.com"}, "password": {"other-boats-float-42"}, "terms": {"yes"}})
		if again.Status != first.Status || strings.ReplaceAll(again.Body, "Ada@Example.com", "ada@example.com") != strings.ReplaceAll(first.Body, "Ada@Example.com", "ada@example.com") {
			t.Fatal("signing up with a registered address answers differently: it reveals who has an account")
		}
		if m := nextMail(t, s, "ada@example.com", 1); !strings.Contains(m.Subject, "tried to create") {
			t.Fatalf("owner not told: %q", m.Subject)
		}

		// Unverified users can sign in, but not create keys or add funds; the console says why.
		if p := b.post("/signin", "/signin", url.Values{"email": {"ada@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 303 || p.location() != "/console" {
			t.Fatalf("sign-in of an unverified user: %d %s", p.Status, p.location())
		}
		b.get("/console").contains(t, "Confirm your e-mail address to add funds and create API keys", "Send the link again")
		if p := b.post("/console/keys", "/console/keys", url.Values{"name": {"x"}}); p.Status != 403 {
			t.Fatalf("key created by an unverified user: %d", p.Status)
		}
		if p := b.post("/console/wallet", "/console/wallet", url.Values{"amount": {"10"}}); p.Status != 403 {
			t.Fatalf("funds added by an unverified user: %d", p.Status)
		}
		var keys int64
		s.DB.R.Model(&models.APIKey{}).Count(&keys)
		if keys != 0 {
			t.Fatal("a key exists")
		}

		// Resending is throttled: 3 verification e-mails per address per 10 minutes (the sign-up's was the
		// 1st; the notice that someone tried to sign up again comes out of the address's other budget).
		for i := range 2 {
			if p := b.post("/console", "/verify/resend", url.Values{}); p.Status != 303 || !strings.Contains(p.location(), "verification-sent") {
				t.Fatalf("resend %d: %d %s", i+1, p.Status, p.location())
			}
			nextMail(t, s, "ada@example.com", 2+i)
		}
		if p := b.post("/console", "/verify/resend", url.Values{}); p.Status != 429 {
			t.Fatalf("4th e-mail in 10 minutes: %d", p.Status)
		} else {
			p.contains(t, "Please wait")
		}

		// Opening the link (as mail scanners do, even with HEAD) spends nothing; the button does, once.
		req, _ := http.NewRequest("HEAD", s.URL+link, nil)
		b.do(req)
		b.get(link)
		confirmEmail(t, b, link)
		if p := b.post("/console", "/verify", url.Values{"token": {link[strings.Index(link, "token=")+6:]}}); p.Status != 400 {
			t.Fatalf("a used link works again: %d", p.Status)
		}
		if p := b.get(link); p.Status != 303 || !strings.Contains(p.location(), "already-verified") {
			t.Fatalf("a used link, opened by its verified owner: %d %s", p.Status, p.location())
		}
		s.DB.R.Take(&u, u.ID)
		if !u.Verified() {
			t.Fatal("not verified")
		}

		// An expired link does not work.
		other := newBrowser(t, s)
		other.post("/signup", "/signup", url.Values{"email": {"late@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
		late := mailedLink(t, s, "late@example.com")
		s.DB.W.Exec("UPDATE email_tokens SET expires_at = ? WHERE purpose = 'verify'", time.Now().UTC().Add(-time.Minute))
		if p := other.get(late); p.Status != 400 {
			t.Fatalf("expired link: %d", p.Status)
		}
		// Tokens are stored hashed: the link's token is nowhere in the database.
		token := late[strings.Index(late, "token=")+6:]
		var found int64
		s.DB.R.Model(&models.EmailToken{}).Where("token_hash = ?", token).Count(&found)
		if found != 0 {
			t.Fatal("an e-mail token is stored in clear")
		}
	})
}

// setCookie returns the cookie an answer sets under a name, or nil.
func setCookie(p *page, name string) *http.Cookie {
	for _, c := range (&http.Response{Header: p.Header}).Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// TestConfirmingFromTheSignUpBrowserSignsIn: the browser that signed up and then confirms the address is
// signed in and sent to the dashboard. Any other browser — the link opened on a phone, a browser that
// signed up with another address, one that signed up again with the same address to get a cookie for
// it, one with a made-up cookie — sees that the address is confirmed, and stays signed out: the link
// alone never signs anyone in.
func TestConfirmingFromTheSignUpBrowserSignsIn(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		form := func(email string) url.Values {
			return url.Values{"email": {email}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}
		}
		signedOut := func(who string, b *browser) {
			t.Helper()
			if p := b.get("/console"); p.Status != 303 || !strings.HasPrefix(p.location(), "/signin") {
				t.Fatalf("%s is signed in: %d %s", who, p.Status, p.location())
			}
		}

		// The same browser signs up, confirms and lands on its dashboard, signed in and verified.
		b := newBrowser(t, s)
		p := b.post("/signup", "/signup", form("Uma@Example.com"))
		c := setCookie(p, "vg_signup")
		if c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/verify" || c.MaxAge != 24*60*60 || strings.Contains(strings.ToLower(c.Value), "uma") {
			t.Fatalf("sign-up cookie %+v: want HttpOnly, SameSite=Lax, for /verify only, for the link's 24 hours, without the address", c)
		}
		link := mailedLink(t, s, "uma@example.com")
		b.get(link).contains(t, "Confirm my e-mail address")
		p = b.post(link, "/verify", url.Values{"token": {link[strings.Index(link, "token=")+6:]}})
		if p.Status != 303 || p.location() != "/console?notice=email-confirmed" {
			t.Fatalf("confirming from the sign-up's browser: %d %q", p.Status, p.location())
		}
		if c := setCookie(p, "vg_signup"); c == nil || c.Value != "" || c.Path != "/verify" || (c.MaxAge >= 0 && !c.Expires.Before(time.Now())) {
			t.Fatalf("the sign-up cookie is not cleared: %+v", c)
		}
		if c := setCookie(p, "vg_session"); c == nil || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.MaxAge != 30*24*60*60 {
			t.Fatalf("session cookie %+v: want the sign-in's settings", c)
		}
		b.get(p.location()).contains(t, "Your e-mail address is confirmed. Welcome!", `<span class="email">uma@example.com</span>`, "Sign out", "Add funds")
		createKey(t, b, "verified") // only a verified user may

		// The link opened on a phone: confirmed, and asked to sign in. The laptop that signed up did not
		// confirm, so it is not signed in either.
		laptop, phone := newBrowser(t, s), newBrowser(t, s)
		laptop.post("/signup", "/signup", form("vic@example.com"))
		p = confirmEmail(t, phone, mailedLink(t, s, "vic@example.com"))
		p.contains(t, `<a class="button" href="/signin">Sign in</a>`)
		p.lacks(t, "Sign out")
		signedOut("the phone", phone)
		signedOut("the laptop", laptop)
		var u models.User
		s.DB.R.Where("email = ?", "vic@example.com").Take(&u)
		if !u.Verified() {
			t.Fatal("the address confirmed from another browser is not verified")
		}

		// A browser that signed up with another address is not signed in to this one.
		wes := newBrowser(t, s)
		wes.post("/signup", "/signup", form("wes@example.com"))
		newBrowser(t, s).post("/signup", "/signup", form("xan@example.com"))
		confirmEmail(t, wes, mailedLink(t, s, "xan@example.com")).lacks(t, "Sign out")
		signedOut("a browser that signed up with another address", wes)

		// Someone who got hold of the link signs up again with the same address, in their own browser, to
		// get a sign-up cookie for it: the cookie proves their sign-up, not the one that sent the link.
		owner, intruder := newBrowser(t, s), newBrowser(t, s)
		owner.post("/signup", "/signup", form("yan@example.com"))
		leaked := mailedLink(t, s, "yan@example.com")
		if p := intruder.post("/signup", "/signup", form("yan@example.com")); setCookie(p, "vg_signup") == nil {
			t.Fatal("the second sign-up got no cookie (its answer would differ)")
		}
		confirmEmail(t, intruder, leaked).lacks(t, "Sign out")
		signedOut("a browser that signed up again with the same address", intruder)

		// A made-up cookie signs nobody in.
		newBrowser(t, s).post("/signup", "/signup", form("zed@example.com"))
		holder := newBrowser(t, s)
		base, _ := url.Parse(s.URL + "/verify")
		holder.c.Jar.SetCookies(base, []*http.Cookie{{Name: "vg_signup", Value: "made-up-proof-of-the-right-length-xx", Path: "/verify"}})
		confirmEmail(t, holder, mailedLink(t, s, "zed@example.com")).lacks(t, "Sign out")
		signedOut("a browser with a made-up cookie", holder)
	})
}

// TestSignUpAnswersAlikeForARegisteredAddress: the sign-up cookie is set whether or not the address had an
// account, so status, headers (all but the cookie's value, the date and the request id) and page are the
// same, and the form still tells nobody who has an account.
func TestSignUpAnswersAlikeForARegisteredAddress(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		form := url.Values{"email": {"zoe@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}
		fresh := newBrowser(t, s).post("/signup", "/signup", form)
		nextMail(t, s, "zoe@example.com", 0) // the verification link: the address has an account now
		again := newBrowser(t, s).post("/signup", "/signup", form)
		if m := nextMail(t, s, "zoe@example.com", 1); !strings.Contains(m.Subject, "tried to create") {
			t.Fatalf("the second sign-up was not for a registered address: %q", m.Subject)
		}
		shape := func(p *page) []string {
			var out []string
			for k, vs := range p.Header {
				if k == "Date" || k == "X-Request-Id" {
					continue
				}
				for _, v := range vs {
					if k == "Set-Cookie" {
						name, rest, _ := strings.Cut(v, "=")
						_, attrs, _ := strings.Cut(rest, ";")
						v = name + "=…;" + attrs
					}
					out = append(out, k+": "+v)
				}
			}
			slices.Sort(out)
			return out
		}
		if fresh.Status != again.Status || fresh.Body != again.Body || !slices.Equal(shape(fresh), shape(again)) {
			t.Fatalf("a registered address gets another answer:\n%d %q\n%d %q", fresh.Status, shape(fresh), again.Status, shape(again))
		}
		if setCookie(fresh, "vg_signup") == nil || setCookie(again, "vg_signup") == nil {
			t.Fatal("the sign-up cookie is not set on both answers")
		}
	})
}

var setCookieRE = regexp.MustCompile(`vg_session=[^;]+`)

func TestSessions(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		a := signUpVerified(t, s, "sam@example.com")

		// A wrong password: an answer that keeps the address and says what to do.
		other := newBrowser(t, s)
		p := other.post("/signin", "/signin", url.Values{"email": {"sam@example.com"}, "password": {"wrong-password-1"}})
		if p.Status != 401 {
			t.Fatalf("wrong password: %d", p.Status)
		}
		p.contains(t, "The e-mail address or the password is not right", `value="sam@example.com"`)
		p.lacks(t, "wrong-password-1")
		// An unknown address answers exactly alike.
		q := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"nobody@example.com"}, "password": {"wrong-password-1"}})
		if q.Status != 401 || !strings.Contains(q.Body, "The e-mail address or the password is not right") {
			t.Fatalf("unknown address: %d", q.Status)
		}

		// The session cookie is HttpOnly and SameSite=Lax; the database holds only a hash of it.
		p = other.post("/signin", "/signin", url.Values{"email": {"sam@example.com"}, "password": {"paper-boats-float-42"}, "next": {"/console/wallet"}})
		cookie := strings.Join(p.Header.Values("Set-Cookie"), "\n")
		if p.Status != 303 || p.location() != "/console/wallet" || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Lax") || strings.Contains(strings.ToLower(cookie), "secure") {
			t.Fatalf("sign-in: %d %s cookie %q", p.Status, p.location(), cookie)
		}
		value := strings.TrimPrefix(setCookieRE.FindString(cookie), "vg_session=")
		var stored int64
		s.DB.R.Model(&models.Session{}).Where("token_hash = ?", value).Count(&stored)
		if value == "" || stored != 0 {
			t.Fatal("the session token is stored in clear")
		}
		// A next= that leaves the site is ignored.
		if p := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"sam@example.com"}, "password": {"paper-boats-float-42"}, "next": {"//evil.example/"}}); p.location() != "/console" {
			t.Fatalf("open redirect to %q", p.location())
		}

		// Signing out ends the session in the database: replaying the old cookie no longer works.
		replay := newBrowser(t, s)
		u, _ := url.Parse(s.URL)
		replay.c.Jar.SetCookies(u, other.c.Jar.Cookies(u))
		if p := other.post("/console", "/signout", url.Values{}); p.Status != 303 {
			t.Fatalf("sign-out: %d", p.Status)
		}
		if p := replay.get("/console"); p.Status != 303 || !strings.HasPrefix(p.location(), "/signin") {
			t.Fatalf("a signed-out session still works: %d", p.Status)
		}

		// Changing the password ends every other session; this browser stays signed in.
		b := signUpVerifiedAgain(t, s, "sam@example.com")
		p = a.submit("/console/account", "current", url.Values{"current": {"paper-boats-float-42"}, "password": {"new-kites-fly-high-7"}})
		if p.Status != 303 || !strings.Contains(p.location(), "password-changed") {
			t.Fatalf("change password: %d %s", p.Status, p.location())
		}
		if p := a.get("/console"); p.Status != 200 {
			t.Fatalf("the browser that changed the password was signed out: %d", p.Status)
		}
		if p := b.get("/console"); p.Status != 303 {
			t.Fatalf("another browser is still signed in after a password change: %d", p.Status)
		}
		if p := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"sam@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 401 {
			t.Fatal("the old password still works")
		}
		if p := a.submit("/console/account", "current", url.Values{"current": {"not-my-password"}, "password": {"another-new-one-9"}}); p.Status != 422 {
			t.Fatalf("wrong current password: %d", p.Status)
		} else {
			p.contains(t, "This is not your current password")
		}
	})
}

// signUpVerifiedAgain signs an existing user in from a new browser.
func signUpVerifiedAgain(t *testing.T, s *testkit.Server, email string) *browser {
	t.Helper()
	b := newBrowser(t, s)
	if p := b.post("/signin", "/signin", url.Values{"email": {email}, "password": {"paper-boats-float-42"}}); p.Status != 303 {
		t.Fatalf("sign-in: %d", p.Status)
	}
	return b
}

func TestSecureCookieOverHTTPS(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "PUBLIC_BASE_URL": "https://videogen.example"})
	p := newBrowser(t, s).get("/signin")
	if c := p.Header.Get("Set-Cookie"); !strings.Contains(strings.ToLower(c), "; secure") {
		t.Fatalf("cookie without Secure under an https PUBLIC_BASE_URL: %q", c)
	}
}

// resetRequestsWaiting counts the password-reset requests not handled yet: their jobs, which the handling
// deletes (internal/domain/auth/reset.go).
func resetRequestsWaiting(t *testing.T, s *testkit.Server) int {
	t.Helper()
	res, err := s.Queue.Client().JobList(context.Background(), river.NewJobListParams().Kinds(auth.ResetArgs{}.Kind()))
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Jobs)
}

func TestPasswordReset(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		signedIn := signUpVerified(t, s, "rae@example.com")
		b := newBrowser(t, s)

		// Known and unknown addresses get the same answer; only the known one gets an e-mail.
		known := b.post("/password/forgot", "/password/forgot", url.Values{"email": {"rae@example.com"}})
		unknown := b.post("/password/forgot", "/password/forgot", url.Values{"email": {"ghost@example.com"}})
		if known.Status != 200 || unknown.Status != 200 || strings.Count(known.Body, "we have sent it a link") != 1 || strings.Count(unknown.Body, "we have sent it a link") != 1 {
			t.Fatal("the reset form answers differently for a registered address")
		}
		nextMail(t, s, "rae@example.com", 1) // after the verification e-mail
		waitFor(t, s, "the queued reset requests are handled (internal/domain/auth/reset.go)", func() bool {
			return resetRequestsWaiting(t, s) == 0
		})
		if _, ok := s.Mails.Last("ghost@example.com"); ok {
			t.Fatal("an e-mail went to an unknown address")
		}
		stale := mailedLink(t, s, "rae@example.com")
		b.post("/password/forgot", "/password/forgot", url.Values{"email": {"rae@example.com"}})
		nextMail(t, s, "rae@example.com", 2)
		link := mailedLink(t, s, "rae@example.com")
		if !strings.Contains(b.get(stale).Body, "This link does not work") {
			t.Fatal("an older reset link still works after a newer one was sent")
		}

		form := b.get(link)
		form.contains(t, "Choose a new password")
		token := link[strings.Index(link, "token=")+6:]
		if p := b.post(link, "/password/reset", url.Values{"token": {token}, "password": {"123"}}); p.Status != 422 {
			t.Fatalf("weak password: %d", p.Status)
		}
		p := b.post(link, "/password/reset", url.Values{"token": {token}, "password": {"fresh-start-2027"}})
		if p.Status != 303 || !strings.Contains(p.location(), "password-reset") {
			t.Fatalf("reset: %d %s", p.Status, p.location())
		}
		if p := signedIn.get("/console"); p.Status != 303 {
			t.Fatal("a reset did not end the other sessions")
		}
		if p := b.post("/signin", "/password/reset", url.Values{"token": {token}, "password": {"again-another-2028"}}); p.Status != 400 {
			t.Fatalf("a reset link worked twice: %d", p.Status)
		}
		if p := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"rae@example.com"}, "password": {"fresh-start-2027"}}); p.Status != 303 {
			t.Fatalf("sign-in with the new password: %d", p.Status)
		}
	})
}

func TestSignInThrottled(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"})
	signUpVerified(t, s, "tia@example.com")

	// Per address: ten tries in 15 minutes, then even the right password waits.
	b := newBrowser(t, s)
	b.ip = "198.51.100.1"
	for i := 0; i < 10; i++ {
		if p := b.post("/signin", "/signin", url.Values{"email": {"tia@example.com"}, "password": {"guess-guess-" + string(rune('a'+i))}}); p.Status != 401 {
			t.Fatalf("try %d: %d", i+1, p.Status)
		}
	}
	p := b.post("/signin", "/signin", url.Values{"email": {"tia@example.com"}, "password": {"paper-boats-float-42"}})
	if p.Status != 429 || p.Header.Get("Retry-After") == "" {
		t.Fatalf("11th try on one address: %d", p.Status)
	}
	p.contains(t, "Too many sign-in attempts for this address", "reset your password")
}

// TestStrangersCannotLockTheOwnerOut: the probe's lockout — wrong passwords for one address from many
// networks — no longer keeps the owner out. Ten strangers' failures leave a fresh client's sign-in alone.
// Past the ceiling of a hundred attempts from clients the account does not know, a new stranger waits,
// even with the right password; the owner does not: from the network they signed in from before, from
// their own browser on a new network, or from the browser where they just reset their password. The
// server's clock stands still, so no token comes back while the test counts them (on a loaded machine
// the hundred password checks take longer than a token's refill).
func TestStrangersCannotLockTheOwnerOut(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		frozen := time.Now()
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"},
			server.Options{Now: func() time.Time { return frozen }})
		signUpVerified(t, s, "t30@example.com")
		const password = "paper-boats-float-42"
		signIn := func(b *browser, pw string) *page {
			t.Helper()
			return b.post("/signin", "/signin", url.Values{"email": {"t30@example.com"}, "password": {pw}})
		}
		// The owner's laptop signs in at home, and out again.
		laptop := newBrowser(t, s)
		laptop.ip = "198.51.100.50"
		if p := signIn(laptop, password); p.Status != 303 {
			t.Fatalf("the owner at home: %d", p.Status)
		}
		if p := laptop.post("/console", "/signout", url.Values{}); p.Status != 303 {
			t.Fatalf("sign-out: %d", p.Status)
		}

		stranger := func(i int) *page {
			b := newBrowser(t, s)
			b.ip = "203.0.113." + itoa(i%250+1)
			if i >= 250 {
				b.ip = "192.0.2." + itoa(i%250+1)
			}
			return signIn(b, "guess-number-"+itoa(i))
		}
		for i := range 10 {
			if p := stranger(i); p.Status != 401 {
				t.Fatalf("stranger %d: %d", i+1, p.Status)
			}
		}
		fresh := newBrowser(t, s)
		fresh.ip = "198.51.100.60"
		if p := signIn(fresh, password); p.Status != 303 {
			t.Fatalf("the right password from a fresh client after ten strangers' failures: %d, want 303", p.Status)
		}

		// The guessing goes on from 88 more networks: with the two sign-ins above (neither browser was
		// known yet), a hundred attempts from clients the account does not know reach the ceiling.
		for i := 10; i < 98; i++ {
			if p := stranger(i); p.Status != 401 {
				t.Fatalf("stranger %d: %d", i+1, p.Status)
			}
		}
		if p := stranger(100); p.Status != 429 || p.Header.Get("Retry-After") == "" {
			t.Fatalf("a stranger past the ceiling: %d", p.Status)
		}
		newcomer := newBrowser(t, s)
		newcomer.ip = "198.51.100.70"
		if p := signIn(newcomer, password); p.Status != 429 {
			t.Fatalf("the right password from a client the account does not know, past the ceiling: %d, want 429", p.Status)
		} else {
			p.contains(t, "Too many sign-in attempts for this address", "reset your password")
		}

		// The owner, while the stranger keeps guessing: from home in another browser (the network is
		// known), and from the laptop on a network never seen (its device cookie is).
		home := newBrowser(t, s)
		home.ip = "198.51.100.50"
		if p := signIn(home, password); p.Status != 303 {
			t.Fatalf("the owner from home during the guessing: %d, want 303", p.Status)
		}
		laptop.ip = "198.51.100.80"
		if p := signIn(laptop, password); p.Status != 303 {
			t.Fatalf("the owner's laptop on a new network during the guessing: %d, want 303", p.Status)
		}
		if p := stranger(101); p.Status != 429 {
			t.Fatalf("the stranger after the owner signed in: %d", p.Status)
		}

		// A reset proves the mailbox: the browser that sets the new password may sign in with it.
		newcomer.post("/password/forgot", "/password/forgot", url.Values{"email": {"t30@example.com"}})
		nextMail(t, s, "t30@example.com", 1) // after the verification e-mail
		link := mailedLink(t, s, "t30@example.com")
		token := link[strings.Index(link, "token=")+6:]
		if p := newcomer.post(link, "/password/reset", url.Values{"token": {token}, "password": {"a-new-start-2031"}}); p.Status != 303 {
			t.Fatalf("reset: %d", p.Status)
		}
		if p := signIn(newcomer, "a-new-start-2031"); p.Status != 303 {
			t.Fatalf("sign-in from the browser that reset the password: %d, want 303", p.Status)
		}
	})
}

// TestSignInThrottledPerIP: per client IP, as seen through the trusted proxy: 30 tries across addresses,
// then the IP waits; another client behind the same proxy does not.
func TestSignInThrottledPerIP(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"})
	c := newBrowser(t, s)
	c.ip = "203.0.113.7"
	for i := 0; i < 30; i++ {
		if p := c.post("/signin", "/signin", url.Values{"email": {"ip-test-" + itoa(i) + "@example.com"}, "password": {"whatever-123"}}); p.Status != 401 {
			t.Fatalf("try %d from one IP: %d\n%s", i+1, p.Status, trimPage(p.Body))
		}
	}
	if p := c.post("/signin", "/signin", url.Values{"email": {"fresh@example.com"}, "password": {"whatever-123"}}); p.Status != 429 {
		t.Fatalf("31st try from one IP: %d", p.Status)
	} else {
		p.contains(t, "Too many sign-in attempts from your network")
	}
	d := newBrowser(t, s)
	d.ip = "203.0.113.8"
	if p := d.post("/signin", "/signin", url.Values{"email": {"fresh@example.com"}, "password": {"whatever-123"}}); p.Status != 401 {
		t.Fatalf("another client IP was throttled: %d", p.Status)
	}
}

// TestForwardedForIgnoredWithoutTrustedProxies: without TRUSTED_PROXIES, a client cannot dodge the per-IP
// throttle by sending a different X-Forwarded-For each time.
func TestForwardedForIgnoredWithoutTrustedProxies(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := newBrowser(t, s)
	for i := 0; i < 30; i++ {
		b.ip = "203.0.113." + itoa(i+1)
		if p := b.post("/signin", "/signin", url.Values{"email": {"u" + itoa(i) + "@example.com"}, "password": {"whatever-123"}}); p.Status != 401 {
			t.Fatalf("try %d: %d", i+1, p.Status)
		}
	}
	b.ip = "192.0.2.99"
	if p := b.post("/signin", "/signin", url.Values{"email": {"last@example.com"}, "password": {"whatever-123"}}); p.Status != 429 {
		t.Fatalf("a forged X-Forwarded-For dodged the throttle: %d", p.Status)
	}
}

// TestEveryFormNeedsCSRF posts to every state-changing route without a token, and with another
// browser's token: each is refused and changes nothing.
func TestEveryFormNeedsCSRF(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
	b := signUpVerified(t, s, "csrf@example.com")
	b.post("/console/keys", "/console/keys", url.Values{"name": {"k"}})
	var key models.APIKey
	s.DB.R.Take(&key)
	foreign := newBrowser(t, s)
	m := csrfRE.FindStringSubmatch(foreign.get("/signin").Body)
	for _, path := range []string{"/signup", "/signin", "/signout", "/verify", "/verify/resend", "/password/forgot", "/password/reset",
		"/password/reset/signout", "/console/keys", "/console/keys/" + itoa(int(key.ID)) + "/revoke", "/console/wallet", "/console/account"} {
		for _, token := range []string{"", m[1]} {
			p := b.postRaw(path, url.Values{"_csrf": {token}, "email": {"x@example.com"}, "name": {"k2"}, "amount": {"10"}, "tz": {"Asia/Tokyo"}, "form": {"timezone"}})
			if p.Status != 403 {
				t.Errorf("POST %s with token %q: %d, want 403", path, token, p.Status)
			}
		}
	}
	var entries, keys int64
	s.DB.R.Model(&models.LedgerEntry{}).Count(&entries)
	s.DB.R.Model(&models.APIKey{}).Where("revoked_at IS NULL").Count(&keys)
	var u models.User
	s.DB.R.Where("email = ?", "csrf@example.com").Take(&u)
	if entries != 0 || keys != 1 || u.TimeZone != "" {
		t.Fatalf("refused forms changed data: %d entries, %d active keys, time zone %q", entries, keys, u.TimeZone)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestNextStaysOnThisSite: the post-sign-in redirect never leaves the site nor splits the header.
func TestNextStaysOnThisSite(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := signUpVerified(t, s, "nx@example.com")
	for _, n := range []string{"/\t/evil.example", "/\r\nSet-Cookie: x=1", "/\\evil.example", "//evil.example", "https://evil.example/",
		"/%0d%0aSet-Cookie:%20x=1", "javascript:alert(1)", "/\x7f"} {
		p := b.get("/signin?next=" + url.QueryEscape(n))
		loc := p.location()
		if strings.ContainsAny(loc, "\t\r\n\\") || strings.Contains(strings.Join(p.Header.Values("Set-Cookie"), ";"), "x=1") ||
			strings.Contains(loc, "evil.example") || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
			t.Errorf("next=%q: redirected to %q", n, loc)
		}
	}
	if p := b.get("/signin?next=" + url.QueryEscape("/console/tasks?status=failed")); p.location() != "/console/tasks?status=failed" {
		t.Errorf("a plain next was not kept: %q", p.location())
	}
}

// TestSignInWithAStaleSessionCookie: a browser whose session expired can still use the sign-in form.
func TestSignInWithAStaleSessionCookie(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := signUpVerified(t, s, "stale@example.com")
	s.DB.W.Exec("UPDATE sessions SET expires_at = ?", time.Now().UTC().Add(-time.Minute))
	if p := b.post("/signin", "/signin", url.Values{"email": {"stale@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 303 {
		t.Fatalf("sign-in after a session expired: %d", p.Status)
	}
	if p := b.get("/console"); p.Status != 200 {
		t.Fatalf("dashboard: %d", p.Status)
	}
}

// TestFormsThrottledPerIP: one client cannot send sign-ups (each hashes a password and sends an e-mail)
// or reset requests without bound.
func TestFormsThrottledPerIP(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"})
	b := newBrowser(t, s)
	b.ip = "198.51.100.20"
	for i := 0; i < 20; i++ {
		if p := b.post("/signup", "/signup", url.Values{"email": {"spam" + itoa(i) + "@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}); p.Status != 200 {
			t.Fatalf("sign-up %d: %d", i+1, p.Status)
		}
	}
	for _, path := range []string{"/signup", "/password/forgot"} {
		p := b.post(path, path, url.Values{"email": {"one-more@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
		if p.Status != 429 || p.Header.Get("Retry-After") == "" {
			t.Fatalf("%s after 20 forms from one IP: %d", path, p.Status)
		}
	}
	other := newBrowser(t, s)
	other.ip = "198.51.100.21"
	if p := other.post("/signup", "/signup", url.Values{"email": {"honest@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}); p.Status != 200 {
		t.Fatalf("another client was throttled: %d", p.Status)
	}
}

// TestCSRFTokenOnlyFromTheBody: a form's token counts only in the form body (or, for scripts, the
// X-CSRF-Token header), never in the query string, where it would land in browser history and proxy logs;
// nor do a form's other fields come from the query string. The probe's request was an admin credit:
// POST /support/accounts/{id}/balance?_csrf=…&direction=credit&amount=1&reason=…&confirm=yes.
func TestCSRFTokenOnlyFromTheBody(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	adm := signInStaff(t, s, "csrf-boss@example.com", "admin")
	cust := s.NewAccount(t, "10")
	base := "/support/accounts/" + itoa(int(cust.ID))
	token := html.UnescapeString(csrfRE.FindStringSubmatch(adm.get(base).Body)[1])
	credit := url.Values{"direction": {"credit"}, "amount": {"1"}, "reason": {"probe"}, "confirm": {"yes"}}
	adjustments := func() int64 {
		var n int64
		s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ? AND kind = ?", cust.ID, models.KindAdjustment).Count(&n)
		return n
	}
	before := adjustments()

	inQuery := url.Values{"_csrf": {token}}
	for k, v := range credit {
		inQuery[k] = v
	}
	if p := adm.postRaw(base+"/balance?"+inQuery.Encode(), url.Values{}); p.Status != 403 {
		t.Fatalf("the token and fields in the query string: %d, want 403", p.Status)
	}
	if p := adm.postRaw(base+"/balance?"+inQuery.Encode(), url.Values{"x": {"1"}}); p.Status != 403 {
		t.Fatalf("the token in the query string beside a form body: %d, want 403", p.Status)
	}
	// The token in the body, the amount only in the query string: the form is read from its body alone,
	// so it lacks an amount and nothing moves.
	if p := adm.postRaw(base+"/balance?amount=1", url.Values{"_csrf": {token}, "direction": {"credit"}, "reason": {"probe"}, "confirm": {"yes"}}); p.Status != 422 {
		t.Fatalf("an amount only in the query string: %d, want 422", p.Status)
	}
	if n := adjustments(); n != before {
		t.Fatalf("refused forms credited the account: %d adjustments, %d before", n, before)
	}

	// The same form with its token in the body, or in the header a script sends, goes through.
	body := url.Values{"_csrf": {token}}
	for k, v := range credit {
		body[k] = v
	}
	adm.postRaw(base+"/balance", body).admStatus(t, "the token in the body", 303)
	req, _ := http.NewRequest("POST", s.URL+base+"/balance", strings.NewReader(credit.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-CSRF-Token", token)
	adm.do(req).admStatus(t, "the token in X-CSRF-Token", 303)
	if n := adjustments(); n != before+2 {
		t.Fatalf("%d adjustments after two good forms, want %d", n, before+2)
	}
}

// BenchmarkForgotPassword times the reset form's answer, one request at a time as the probe sent them,
// for a registered address and for one nobody registered: the two must take the same time (the form only
// queues the request; internal/domain/auth/reset.go). Run with -benchtime=2000x -count=5 and compare the two.
func BenchmarkForgotPassword(b *testing.B) {
	for _, who := range []string{"registered", "unknown"} {
		b.Run(who, func(b *testing.B) {
			s := testkit.Start(b, testkit.SQLiteURL(b), map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"})
			s.NewAccount(b, "0") // an account, so the database is not empty
			email := "nobody-" + who + "@example.com"
			if who == "registered" {
				var u models.User
				if err := s.DB.R.Take(&u).Error; err != nil {
					b.Fatal(err)
				}
				email = u.Email
			}
			jar, _ := cookiejar.New(nil)
			client := &http.Client{Jar: jar}
			page, err := client.Get(s.URL + "/password/forgot")
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(page.Body)
			page.Body.Close()
			token := html.UnescapeString(csrfRE.FindStringSubmatch(string(body))[1])
			form := url.Values{"_csrf": {token}, "email": {email}}.Encode()
			b.ResetTimer()
			for i := range b.N {
				req, _ := http.NewRequest("POST", s.URL+"/password/forgot", strings.NewReader(form))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				// One client per request, as the forms' per-client throttle would otherwise answer 429.
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("answer %d", resp.StatusCode)
				}
			}
		})
	}
}

// TestRecoveryMailHasItsOwnBudget: e-mails to an address come out of two budgets. What anyone can cause
// — invitations from any account, the notice that someone tried to sign up with the address — spends
// its notices budget (3 in 10 minutes); the address's own recovery mail has a budget of its own, which
// none of that reaches. Resets asked by strangers (clients the account does not know) have their own
// shares of it, per network: three from one stranger's network, and a fourth goes unsent, yet the owner
// on a new device and network still gets a link, and so do they from their own browser.
func TestRecoveryMailHasItsOwnBudget(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TRUSTED_PROXIES": "127.0.0.1"})
		const addr = "dev@a.test"
		dev := signUpVerified(t, s, addr)
		boss := signUpVerified(t, s, "boss@b.test")
		// askReset files the reset form as b and waits until the request is handled; it returns how many
		// reset e-mails the address has had queued (the outbox row commits with the request's handling).
		askReset := func(b *browser) int64 {
			t.Helper()
			if p := b.post("/password/forgot", "/password/forgot", url.Values{"email": {addr}}); p.Status != 200 {
				t.Fatalf("reset form: %d", p.Status)
			}
			testkit.Eventually(t, 30*time.Second, "the reset request is handled", func() bool { return resetRequestsWaiting(t, s) == 0 })
			var n int64
			s.DB.R.Model(&models.MailOutbox{}).Where("recipient = ? AND kind = 'reset'", addr).Count(&n)
			return n
		}

		// Another account invites the address until its notices budget is spent; a stranger's sign-up
		// with it is then silent too.
		for i := range 4 {
			p := boss.submit("/console/members", "email", url.Values{"email": {addr}, "role": {"viewer"}})
			if want := map[bool]int{true: 303, false: 422}[i < 3]; p.Status != want {
				t.Fatalf("invitation %d to %s: %d, want %d", i+1, addr, p.Status, want)
			}
		}
		stranger := newBrowser(t, s)
		stranger.ip = "203.0.113.9"
		stranger.post("/signup", "/signup", url.Values{"email": {addr}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}).contains(t, "Check your inbox")

		// The owner's own reset still goes out.
		if n := askReset(dev); n != 1 {
			t.Fatalf("the owner's reset after three invitations from another account: %d reset e-mails, want 1", n)
		}
		// Strangers' resets: three go out, the fourth does not...
		for i := range 4 {
			want := int64(min(i+2, 4))
			if n := askReset(stranger); n != want {
				t.Fatalf("stranger's reset %d: %d reset e-mails, want %d", i+1, n, want)
			}
		}
		// ...and the owner is still heard: on a new device, from another network...
		lost := newBrowser(t, s)
		lost.ip = "198.51.100.50"
		if n := askReset(lost); n != 5 {
			t.Fatalf("the owner's reset from a new device and network after a stranger spent theirs: %d reset e-mails, want 5", n)
		}
		// ...and from their own browser.
		if n := askReset(dev); n != 6 {
			t.Fatalf("the owner's reset after strangers spent theirs: %d reset e-mails, want 6", n)
		}
	})
}
