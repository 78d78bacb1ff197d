package handlers_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestNamedOrganisations: an account has a name, given at sign-up or taken from the e-mail's domain,
// shown whole in the header beside the member's address, on invitations, statements and staff pages;
// owners and admins rename it on the Account page, other roles are told why they cannot.
func TestNamedOrganisations(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})

		// Named at sign-up, whole in the header even when long.
		const long = "Acme Moving Pictures International Studios"
		owner := newBrowser(t, s)
		owner.post("/signup", "/signup", url.Values{"email": {"alice.with.a.long.address@acme-studios.example"}, "password": {"paper-boats-float-42"},
			"terms": {"yes"}, "account_name": {"  " + long + " "}}).contains(t, "Check your inbox")
		confirmEmail(t, owner, mailedLink(t, s, "alice.with.a.long.address@acme-studios.example"))
		header := between(owner.get("/console").Body, `<div class="who">`, "</a>")
		if !strings.Contains(header, `<span class="org">`+long+`</span>`) || !strings.Contains(header, `<span class="email">alice.with.a.long.address@acme-studios.example</span>`) {
			t.Fatalf("the header: %s", header)
		}

		// Without a name: the e-mail's domain. A refused name keeps the form, creates nothing.
		signUpVerified(t, s, "bob@bobsvideos.example")
		var bob models.Account
		s.DB.R.Joins("JOIN users ON users.account_id = accounts.id").Where("users.email = ?", "bob@bobsvideos.example").Take(&bob)
		if bob.Name != "bobsvideos.example" {
			t.Errorf("an account named at sign-up without a name: %q", bob.Name)
		}
		p := newBrowser(t, s).post("/signup", "/signup", url.Values{"email": {"carol@example.com"}, "password": {"paper-boats-float-42"},
			"terms": {"yes"}, "account_name": {strings.Repeat("x", 81)}})
		if p.Status != 422 || !strings.Contains(p.Body, "At most 80 characters (this has 81).") {
			t.Fatalf("a name too long: %d %s", p.Status, trimPage(p.Body))
		}
		var n int64
		s.DB.R.Model(&models.User{}).Where("email = ?", "carol@example.com").Count(&n)
		if n != 0 {
			t.Fatal("a refused sign-up created a user")
		}

		// The owner renames it; invitations, the invite page and statements follow.
		if p := owner.submit("/console/account", "account_name", url.Values{"account_name": {""}}); p.Status != 422 || !strings.Contains(p.Body, "Give the account a name.") {
			t.Fatalf("an empty name: %d %s", p.Status, trimPage(p.Body))
		}
		p = owner.submit("/console/account", "account_name", url.Values{"account_name": {"Acme"}})
		if p.Status != 303 {
			t.Fatalf("rename: %d %s", p.Status, trimPage(p.Body))
		}
		owner.get(p.location()).contains(t, `<span class="org">Acme</span>`, `value="Acme"`, "The account&#39;s name was saved.")
		link := invite(t, s, owner, "dev@example.com", "developer")
		if m, _ := s.Mails.Last("dev@example.com"); !strings.Contains(m.Subject, "alice.with.a.long.address@acme-studios.example invited you to join Acme on videogen") {
			t.Errorf("the invitation's subject: %q", m.Subject)
		}
		newBrowser(t, s).get(link).contains(t, "<h1>Join Acme</h1>")
		owner.get("/console/statements/"+time.Now().UTC().Format("2006-01")).contains(t, "<dd>Acme</dd>")

		// A developer sees the name, not the form, and is refused if they post it.
		dev := join(t, s, link)
		page := dev.get("/console/account")
		page.contains(t, `<strong id="account-name">Acme</strong>`, "Your role (developer) cannot rename the account")
		page.lacks(t, `name="account_name"`)
		if p := dev.postRaw("/console/account", url.Values{"_csrf": {csrfOf(t, dev, "/console/account")}, "form": {"name"}, "account_name": {"Hijacked"}}); p.Status != 403 || !strings.Contains(p.Body, "Your role (developer) cannot rename the account") {
			t.Errorf("a developer renaming: %d %s", p.Status, trimPage(p.Body))
		}

		// Staff see it on the account's page and in the banner of its pages.
		var acct models.User
		s.DB.R.Where("email = ?", "dev@example.com").Take(&acct)
		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		base := fmt.Sprintf("/support/accounts/%d", acct.AccountID)
		sup.get(base).contains(t, fmt.Sprintf(`<h1>Acme <span class="muted">· account #%d</span></h1>`, acct.AccountID))
		sup.get(base+"/tasks").contains(t, fmt.Sprintf(`of <a href="%s">Acme</a> (account #%d)`, base, acct.AccountID))
	})
}
