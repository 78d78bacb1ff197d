package handlers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"videogen/internal/domain/accounts"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestSetPasswordLinkNamesTheAccount: the page a set-password link opens names the account it sets. An
// operator-made account's first link (`videogen accounts create` without --password) reads "Choose your
// password", a reset "Choose a new password". Opened while another user is signed in in the browser, it
// says so and shows no form: posting the form anyway changes nothing (409), that user stays signed in;
// "Sign out and continue" ends that browser's session only, and then the form sets the password.
func TestSetPasswordLinkNamesTheAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		ctx := context.Background()
		const made = "made.by.cli@example.com"
		u, err := accounts.Create(ctx, s.DB, accounts.NewUser{Email: made, Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		// The link `videogen accounts create` prints (cmd/videogen), made by the same function.
		full, err := s.Auth.SetPasswordLink(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		link := strings.TrimPrefix(full, s.URL)
		token := link[strings.Index(link, "token=")+6:]

		// Nobody signed in: a first password, for the account named.
		p := newBrowser(t, s).get(link)
		p.contains(t, "<title>Choose your password · videogen</title>", "<h1>Choose your password</h1>",
			"Choose the password of <strong>"+made+"</strong>", `name="password"`, "Set the password")
		p.lacks(t, "new password", "signed in as")

		// Someone else signed in in this browser, and in another one.
		other := signUpVerified(t, s, "someone.else@example.com")
		elsewhere := newBrowser(t, s)
		if p := elsewhere.post("/signin", "/signin", url.Values{"email": {"someone.else@example.com"}, "password": {"paper-boats-float-42"}}); p.Status != 303 {
			t.Fatalf("sign in elsewhere: %d", p.Status)
		}
		p = other.get(link)
		p.contains(t, "You are signed in as <strong>someone.else@example.com</strong>; this link sets the password of <strong>"+made+"</strong>.",
			"Sign out someone.else@example.com and continue", `action="/password/reset/signout"`)
		p.lacks(t, `name="password"`)

		// The form posted anyway (a form from before, another tab): nothing is done to either account.
		if p := other.post(link, "/password/reset", url.Values{"token": {token}, "password": {"a-first-password-2030"}}); p.Status != 409 ||
			!strings.Contains(p.Body, "You are signed in as") {
			t.Fatalf("the reset posted while another user is signed in: %d", p.Status)
		}
		if p := other.get("/console"); p.Status != 200 {
			t.Fatalf("the signed-in user was signed out by someone else's link: %d", p.Status)
		}
		var got models.User
		if err := s.DB.R.Where("email = ?", made).Take(&got).Error; err != nil || got.PasswordHash != "" {
			t.Fatal("the password was set from another user's session")
		}

		// Sign out and continue: this browser's session ends (not the other one's), and the form shows.
		p = other.submit(link, "token", url.Values{})
		if p.Posted != "/password/reset/signout" || p.Status != 303 || p.location() != link {
			t.Fatalf("sign out and continue: %s → %d %q, want back to %s", p.Posted, p.Status, p.location(), link)
		}
		if p := other.get("/console"); p.Status != 303 {
			t.Fatalf("still signed in after signing out: %d", p.Status)
		}
		if p := elsewhere.get("/console"); p.Status != 200 {
			t.Fatalf("the other browser's session ended too: %d", p.Status)
		}
		other.get(link).contains(t, "<h1>Choose your password</h1>", `name="password"`)
		p = other.submit(link, "password", url.Values{"password": {"a-first-password-2030"}})
		if p.Status != 303 || p.location() != "/signin?notice=password-set" {
			t.Fatalf("set the first password: %d %q", p.Status, p.location())
		}
		other.get(p.location()).contains(t, "Your password is set. Sign in with it.")
		me := newBrowser(t, s)
		if p := me.post("/signin", "/signin", url.Values{"email": {made}, "password": {"a-first-password-2030"}}); p.Status != 303 {
			t.Fatalf("sign in with the first password: %d", p.Status)
		}

		// A reset of an account that has a password: "Choose a new password", for the account named,
		// with the form even while that same user is signed in here.
		full, err = s.Auth.SetPasswordLink(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		link = strings.TrimPrefix(full, s.URL)
		p = me.get(link)
		p.contains(t, "<h1>Choose a new password</h1>", "Choose a new password for <strong>"+made+"</strong>", `name="password"`, "Set the new password")
		p.lacks(t, "signed in as", "Choose your password")
		if p := me.submit(link, "password", url.Values{"password": {"a-second-password-2031"}}); p.Status != 303 || p.location() != "/signin?notice=password-reset" {
			t.Fatalf("reset: %d %q", p.Status, p.location())
		}
		if p := me.get("/console"); p.Status != 303 {
			t.Fatal("a reset did not sign its own user out")
		}
	})
}
