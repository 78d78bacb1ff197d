package handlers_test

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/members"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

var inviteLinkRE = regexp.MustCompile(`http://[^\s"<>]+/invite\?token=[A-Za-z0-9]+`)

// invite sends the invitation form of the members page as b and returns the link the invitee was
// e-mailed (a path of the server).
func invite(t *testing.T, s *testkit.Server, b *browser, email, role string) string {
	t.Helper()
	seen := mailsTo(s, email)
	p := b.submit("/console/members", "email", url.Values{"email": {email}, "role": {role}})
	if p.Status != 303 || p.location() != "/console/members?notice=member-invited" {
		t.Fatalf("invite %s as %s: %d %s\n%s", email, role, p.Status, p.location(), trimPage(p.Body))
	}
	m := nextMail(t, s, email, seen)
	link := inviteLinkRE.FindString(m.Text)
	if link == "" || !strings.Contains(m.HTML, "Accept the invitation") {
		t.Fatalf("no invitation link in the e-mail to %s: %q", email, m.Text)
	}
	return strings.TrimPrefix(link, s.URL)
}

// join opens an invitation link in a fresh browser, chooses a password and accepts the terms, and
// returns the browser, signed in as the new member.
func join(t *testing.T, s *testkit.Server, link string) *browser {
	t.Helper()
	b := newBrowser(t, s)
	p := b.submit(link, "password", url.Values{"password": {"paper-boats-float-42"}, "terms": {"yes"}})
	if p.Status != 303 || p.location() != "/console?notice=joined" {
		t.Fatalf("join with %s: %d %s\n%s", link, p.Status, p.location(), trimPage(p.Body))
	}
	return b
}

// addMember invites email with role as the owner's browser and joins: the new member's browser.
func addMember(t *testing.T, s *testkit.Server, owner *browser, email, role string) *browser {
	t.Helper()
	return join(t, s, invite(t, s, owner, email, role))
}

func userByEmail(t *testing.T, s *testkit.Server, email string) models.User {
	t.Helper()
	var u models.User
	if err := s.DB.R.Where("email = ?", email).Take(&u).Error; err != nil {
		t.Fatalf("user %s: %v", email, err)
	}
	return u
}

// TestInviteAndJoin: the owner invites by e-mail; the e-mail says who invites whom to what; the link's
// page names the account, the address and the role, and a new person joins with a password of their
// own, signed in at once with a verified address. The link works once; another one, seven days on (the
// server's clock moved), no longer. A browser signed in as someone else is never acted on: the page
// offers to sign out first.
func TestInviteAndJoin(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		var offset atomic.Int64
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"},
			server.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
		owner := signUpVerified(t, s, "olive@example.com")
		owner.get("/console/members").contains(t, "olive@example.com", "owner", "Invite someone", "No invitations waiting")

		// Bad input is refused next to the field, and kept.
		p := owner.submit("/console/members", "email", url.Values{"email": {"not an address"}, "role": {"developer"}})
		if p.Status != 422 || !strings.Contains(p.Body, "Enter an e-mail address") || !strings.Contains(p.Body, `value="not an address"`) {
			t.Fatalf("a bad address: %d\n%s", p.Status, trimPage(p.Body))
		}
		if p := owner.submit("/console/members", "email", url.Values{"email": {"olive@example.com"}, "role": {"developer"}}); p.Status != 422 ||
			!strings.Contains(p.Body, "already a member") {
			t.Fatalf("inviting a member: %d", p.Status)
		}

		link := invite(t, s, owner, "dev@example.com", "developer")
		m, _ := s.Mails.Last("dev@example.com")
		if !strings.Contains(m.Subject, "olive@example.com invited you") || !strings.Contains(m.Text, "as developer") || !strings.Contains(m.Text, "The link works until") {
			t.Fatalf("the invitation e-mail: %q\n%s", m.Subject, m.Text)
		}
		owner.get("/console/members").contains(t, "Pending invitations", "dev@example.com", "invited by olive@example.com", "Withdraw")

		// Someone else signed in in this browser: the page says so, and the form acts on nobody.
		other := signUpVerified(t, s, "other@example.com")
		p = other.get(link)
		p.contains(t, "You are signed in as other@example.com", "This invitation is for dev@example.com", "Sign out of other@example.com")
		if p := other.postRaw(link[:strings.Index(link, "?")], url.Values{"_csrf": {csrfOf(t, other, link)}, "token": {tokenOf(link)},
			"password": {"paper-boats-float-42"}, "terms": {"yes"}}); p.Status != 409 {
			t.Fatalf("accepting while signed in as another: %d", p.Status)
		}
		if p := other.submit(link, "form", nil); p.Status != 303 || p.location() != link {
			t.Fatalf("sign out first: %d %s", p.Status, p.location())
		}
		other.get(link).contains(t, "Join example.com", "You sign in as", "dev@example.com", "Choose your password")

		// A weak password, or no terms: refused, nothing spent.
		if p := other.submit(link, "password", url.Values{"password": {"short"}, "terms": {"yes"}}); p.Status != 422 || !strings.Contains(p.Body, "at least 10 characters") {
			t.Fatalf("a weak password: %d", p.Status)
		}
		if p := other.submit(link, "password", url.Values{"password": {"paper-boats-float-42"}}); p.Status != 422 || !strings.Contains(p.Body, "Accept the terms") {
			t.Fatalf("no terms: %d", p.Status)
		}
		dev := join(t, s, link)
		dev.get("/console?notice=joined").contains(t, "Welcome! You are now a member", "dev@example.com")
		if u := userByEmail(t, s, "dev@example.com"); u.AccountRole != "developer" || u.AccountID != userByEmail(t, s, "olive@example.com").AccountID || !u.Verified() {
			t.Fatalf("the new member: %+v", u)
		}
		list := owner.get("/console/members")
		list.contains(t, "dev@example.com", "No invitations waiting")
		if p := newBrowser(t, s).get(link); p.Status != 410 || !strings.Contains(p.Body, "This invitation does not work") {
			t.Fatalf("the link used again: %d", p.Status)
		}

		// An address that signs in to another account is invited as any address: the answer tells the
		// inviter nothing about other accounts' logins. Its page — which only the address's owner sees —
		// says why it cannot join (one login belongs to one account), and its form is refused.
		// invite checks the answer is the one any invitation gets (303 to the members page's notice) and
		// reads the link from the e-mail.
		elsewhere := invite(t, s, owner, "other@example.com", "viewer")
		ep := newBrowser(t, s).get(elsewhere)
		if ep.Status != 409 || !strings.Contains(ep.Body, "other@example.com already signs in to another videogen account") ||
			!strings.Contains(ep.Body, "Ask olive@example.com to invite another address of yours") || strings.Contains(ep.Body, "Choose your password") {
			t.Fatalf("the page of an invitation to another account's login: %d\n%s", ep.Status, trimPage(ep.Body))
		}
		if u := userByEmail(t, s, "other@example.com"); u.AccountID == userByEmail(t, s, "olive@example.com").AccountID {
			t.Fatal("another account's login moved")
		}

		// Inviting one address again and again is throttled as every e-mail to an address is (3 in 10
		// minutes): an inbox cannot be flooded through the form. Each new invitation replaces the last.
		for i := range 4 {
			p := owner.submit("/console/members", "email", url.Values{"email": {"flood@example.com"}, "role": {"viewer"}})
			if want := map[bool]int{true: 303, false: 422}[i < 3]; p.Status != want || (i == 3 && !strings.Contains(p.Body, "several times")) {
				t.Fatalf("invitation %d to one address: %d, want %d", i+1, p.Status, want)
			}
		}
		var pendingFlood int64
		s.DB.R.Model(&models.Invitation{}).Where("email = ? AND revoked_at IS NULL", "flood@example.com").Count(&pendingFlood)
		if pendingFlood != 1 {
			t.Fatalf("%d invitations to one address pending, want the newest only", pendingFlood)
		}

		// Seven days on, a link no longer works: neither its page nor its form.
		late := invite(t, s, owner, "late@example.com", "viewer")
		offset.Store(int64(members.InvitationTTL + time.Minute))
		b := newBrowser(t, s)
		if p := b.get(late); p.Status != 410 || !strings.Contains(p.Body, "more than 7 days old") {
			t.Fatalf("a link 7 days old: %d", p.Status)
		}
		if p := b.postRaw("/invite", url.Values{"_csrf": {csrfOf(t, b, "/signin")}, "token": {tokenOf(late)}, "password": {"paper-boats-float-42"}, "terms": {"yes"}}); p.Status != 410 {
			t.Fatalf("accepting a link 7 days old: %d", p.Status)
		}
		var n int64
		s.DB.R.Model(&models.User{}).Where("email = ?", "late@example.com").Count(&n)
		if n != 0 {
			t.Fatal("the late invitation made a user")
		}
		// Withdrawn, a link stops working at once.
		offset.Store(0)
		gone := invite(t, s, owner, "gone@example.com", "viewer")
		var inv models.Invitation
		s.DB.R.Where("email = ? AND revoked_at IS NULL", "gone@example.com").Take(&inv)
		if p := owner.post("/console/members", fmt.Sprintf("/console/members/invitations/%d/withdraw", inv.ID), url.Values{}); p.Status != 303 {
			t.Fatalf("withdraw: %d", p.Status)
		}
		if p := newBrowser(t, s).get(gone); p.Status != 410 {
			t.Fatalf("a withdrawn link: %d", p.Status)
		}
	})
}

func tokenOf(link string) string { return link[strings.Index(link, "token=")+6:] }

// csrfOf is the CSRF token of the page at path, as b sees it.
func csrfOf(t *testing.T, b *browser, path string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(b.get(path).Body)
	if m == nil {
		t.Fatalf("no CSRF token on %s", path)
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// reach is one request of the role matrix: what it sends, and the status an allowed role gets (a role
// not allowed gets 403 and the page that names its role).
type reach struct {
	route   string // the route as registered ("POST /console/keys/:id/revoke")
	path    func(f *fixture) string
	form    url.Values
	allowed []string // the roles that may; "all" for every role
	status  int      // the allowed roles' status
}

// fixture is what a role's requests act on: made fresh for each role by the owner, so that each
// allowed role's request succeeds the same way.
type fixture struct {
	keyID, memberID, invitationID int64
	task, webhook                 string
}

// TestRoleReach: every console route, for each of the five roles, answers as docs/members.md's matrix
// says — page by page, form by form. A viewer's POST is refused everywhere except the forms about
// themselves (password, display time zone, leaving). The table must name every console route the app
// has: a route added without a place in the matrix fails here.
func TestRoleReach(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		owner := signUpVerified(t, s, "olga@example.com")
		addFunds(t, owner, "100")
		ownerKey := createKey(t, owner, "owner's")
		browsers := map[string]*browser{"owner": owner}
		for _, role := range members.Roles[1:] {
			browsers[role] = addMember(t, s, owner, role+"@example.com", role)
		}
		addMember(t, s, owner, "target@example.com", "developer")
		targetID := userByEmail(t, s, "target@example.com").ID
		if p := owner.submit("/console/webhooks", "url", url.Values{"url": {"http://localhost:9/shared"}, "events": {"video.completed"}}); p.Status != 200 {
			t.Fatalf("add the shared endpoint: %d", p.Status)
		}
		var shared models.WebhookEndpoint
		s.DB.R.Where("url = ?", "http://localhost:9/shared").Take(&shared)

		// The owner makes what a role's request acts on.
		n := 0
		prepare := func(t *testing.T) *fixture {
			n++
			f := &fixture{memberID: targetID, webhook: shared.ID}
			secret := createKey(t, owner, fmt.Sprintf("to revoke %d", n))
			var k models.APIKey
			s.DB.R.Where("prefix = ?", secret[:11]).Take(&k)
			f.keyID = k.ID
			f.task = s.CreateVideo(t, ownerKey, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("to cancel %d", n), "seconds": 4})["id"].(string)
			email := fmt.Sprintf("pending-%d@example.com", n)
			invite(t, s, owner, email, "viewer")
			var inv models.Invitation
			s.DB.R.Where("email = ? AND revoked_at IS NULL", email).Take(&inv)
			f.invitationID = inv.ID
			return f
		}
		fixed := func(p string) func(*fixture) string { return func(*fixture) string { return p } }
		all := []string{"all"}
		keyReaders := []string{"owner", "admin", "developer", "viewer"}
		builders := []string{"owner", "admin", "developer"}
		money := []string{"owner", "billing"}
		payments := []string{"owner", "admin", "billing", "viewer"}
		managers := []string{"owner", "admin"}
		table := []reach{
			{"GET /console", fixed("/console"), nil, all, 200},
			{"GET /console/keys", fixed("/console/keys"), nil, keyReaders, 200},
			{"POST /console/keys", fixed("/console/keys"), url.Values{"name": {"made by a role"}}, builders, 200},
			{"GET /console/keys/:id/limits", func(f *fixture) string { return fmt.Sprintf("/console/keys/%d/limits", f.keyID) }, nil, builders, 200},
			{"POST /console/keys/:id/limits", func(f *fixture) string { return fmt.Sprintf("/console/keys/%d/limits", f.keyID) }, url.Values{"spend_limit_usd": {"5"}, "limit_period": {"day"}}, builders, 303},
			{"GET /console/keys/:id/revoke", func(f *fixture) string { return fmt.Sprintf("/console/keys/%d/revoke", f.keyID) }, nil, builders, 200},
			{"POST /console/keys/:id/revoke", func(f *fixture) string { return fmt.Sprintf("/console/keys/%d/revoke", f.keyID) }, url.Values{}, builders, 303},
			{"GET /console/videos/new", fixed("/console/videos/new"), nil, all, 200},
			{"POST /console/videos/new", fixed("/console/videos/new"), url.Values{"model": {"videogen-2.0-mini-480p"}, "prompt": {"made by a role"}, "seconds": {"4"}}, builders, 303},
			{"GET /console/tasks", fixed("/console/tasks"), nil, all, 200},
			{"GET /console/tasks/:id", func(f *fixture) string { return "/console/tasks/" + f.task }, nil, all, 200},
			{"GET /console/tasks/:id/status", func(f *fixture) string { return "/console/tasks/" + f.task + "/status" }, nil, all, 200},
			{"GET /console/tasks/:id/video", func(f *fixture) string { return "/console/tasks/" + f.task + "/video" }, nil, all, 409},
			{"POST /console/tasks/:id/cancel", func(f *fixture) string { return "/console/tasks/" + f.task + "/cancel" }, url.Values{}, builders, 303},
			{"GET /console/calls", fixed("/console/calls"), nil, all, 200},
			{"GET /console/calls.csv", fixed("/console/calls.csv"), nil, all, 200},
			{"GET /console/calls/:request", fixed("/console/calls/req_none"), nil, all, 404},
			{"GET /console/2fa", fixed("/console/2fa"), nil, all, 303},
			{"GET /console/2fa/setup", fixed("/console/2fa/setup"), nil, all, 200},
			{"POST /console/2fa/setup", fixed("/console/2fa/setup"), url.Values{"code": {"000000"}}, all, 422},
			{"POST /console/2fa", fixed("/console/2fa"), url.Values{"code": {"000000"}}, all, 303},
			{"POST /console/2fa/recovery-codes", fixed("/console/2fa/recovery-codes"), url.Values{}, all, 303},
			{"GET /console/wallet", fixed("/console/wallet"), nil, all, 200},
			{"POST /console/wallet", fixed("/console/wallet"), url.Values{"form": {"test"}, "amount": {"5"}}, money, 303},
			{"POST /console/wallet", fixed("/console/wallet"), url.Values{"form": {"alerts"}, "low_balance": {"5"}}, money, 303},
			{"POST /console/wallet", fixed("/console/wallet"), url.Values{"amount": {"5"}}, money, 303},
			{"POST /console/wallet", fixed("/console/wallet"), url.Values{"form": {"billing"}, "billing_name": {"Role Test Ltd"}, "time_zone": {"Europe/Paris"}}, money, 303},
			{"GET /console/usage", fixed("/console/usage"), nil, all, 200},
			{"GET /console/usage.csv", fixed("/console/usage.csv"), nil, all, 200},
			{"GET /console/statements", fixed("/console/statements"), nil, payments, 200},
			{"GET /console/statements/:month", fixed("/console/statements/" + time.Now().UTC().Format("2006-01")), nil, payments, 200},
			{"GET /console/wallet/topups/:id", fixed("/console/wallet/topups/topup_none"), nil, payments, 404},
			{"GET /console/wallet/topups/:id/canceled", fixed("/console/wallet/topups/topup_none/canceled"), nil, money, 404},
			{"GET /console/webhooks", fixed("/console/webhooks"), nil, all, 200},
			{"POST /console/webhooks", fixed("/console/webhooks"), url.Values{"url": {"http://localhost:9/role"}, "events": {"video.failed"}}, builders, 200},
			{"GET /console/webhooks/:id", func(f *fixture) string { return "/console/webhooks/" + f.webhook }, nil, all, 200},
			{"GET /console/webhooks/:id/delete", func(f *fixture) string { return "/console/webhooks/" + f.webhook + "/delete" }, nil, builders, 200},
			{"POST /console/webhooks/:id/deliveries/:delivery/resend", func(f *fixture) string { return "/console/webhooks/" + f.webhook + "/deliveries/999999/resend" }, url.Values{}, builders, 404},
			{"POST /console/webhooks/:id/:action", func(f *fixture) string { return "/console/webhooks/" + f.webhook + "/disable" }, url.Values{}, builders, 303},
			{"GET /console/account", fixed("/console/account"), nil, all, 200},
			{"POST /console/account", fixed("/console/account"), url.Values{"form": {"timezone"}, "tz": {"Europe/Paris"}}, all, 303},
			{"POST /console/account", fixed("/console/account"), url.Values{"form": {"password"}, "current": {"not it at all"}, "password": {"a-new-long-password-9"}}, all, 422},
			{"POST /console/account", fixed("/console/account"), url.Values{"form": {"some-account-setting"}}, money, 400},
			{"POST /console/account", fixed("/console/account"), url.Values{"form": {"name"}, "account_name": {"Role Test"}}, managers, 303},
			{"POST /console/account", fixed("/console/account"), url.Values{"form": {"two-step"}}, []string{"owner"}, 303},
			{"GET /console/members", fixed("/console/members"), nil, all, 200},
			{"POST /console/members", fixed("/console/members"), url.Values{"email": {"new-colleague@example.com"}, "role": {"viewer"}}, managers, 303},
			{"GET /console/members/leave", fixed("/console/members/leave"), nil, all, 200},
			{"POST /console/members/invitations/:id/withdraw", func(f *fixture) string {
				return fmt.Sprintf("/console/members/invitations/%d/withdraw", f.invitationID)
			}, url.Values{}, managers, 303},
			{"POST /console/members/:id/role", func(f *fixture) string { return fmt.Sprintf("/console/members/%d/role", f.memberID) }, url.Values{"role": {"developer"}}, managers, 303},
			{"GET /console/members/:id/remove", func(f *fixture) string { return fmt.Sprintf("/console/members/%d/remove", f.memberID) }, nil, managers, 200},
			{"POST /console/members/:id/remove", fixed("/console/members/999999/remove"), url.Values{}, managers, 404},
			// Last, as it ends the role's membership: everyone may leave — but the only owner (409).
			{"POST /console/members/leave", fixed("/console/members/leave"), url.Values{}, all, 303},
		}

		// Every console route of the app has its row.
		var routes []string
		for _, r := range s.App.GetRoutes(true) {
			if strings.HasPrefix(r.Path, "/console") && (r.Method == "GET" || r.Method == "POST") {
				routes = append(routes, r.Method+" "+r.Path)
			}
		}
		for _, r := range routes {
			if !slices.ContainsFunc(table, func(x reach) bool { return x.route == r }) {
				t.Errorf("the console route %s has no row in the role matrix: add it (docs/members.md)", r)
			}
		}
		for _, x := range table {
			if !slices.Contains(routes, x.route) {
				t.Errorf("the matrix's row %s is no route of the app", x.route)
			}
		}

		for _, role := range members.Roles {
			t.Run(role, func(t *testing.T) {
				b := browsers[role]
				f := prepare(t)
				for _, x := range table {
					path := x.path(f)
					ok := slices.Contains(x.allowed, "all") || slices.Contains(x.allowed, role)
					var p *page
					if strings.HasPrefix(x.route, "GET ") {
						p = b.get(path)
					} else {
						form := url.Values{}
						for k, v := range x.form {
							form[k] = v
						}
						form.Set("_csrf", csrfOf(t, b, "/console/account"))
						p = b.postRaw(path, form)
					}
					want := x.status
					if !ok {
						want = 403
					} else if role == "owner" && x.route == "POST /console/members/leave" {
						want = 409 // the account's only owner
					}
					if p.Status != want {
						t.Errorf("%s %s %v as %s: %d, want %d\n%s", x.route, path, x.form, role, p.Status, want, trimPage(p.Body))
						continue
					}
					if !ok && !strings.Contains(p.Body, "Your role ("+role+") cannot") {
						t.Errorf("%s as %s: the refusal does not name the role:\n%s", x.route, role, trimPage(p.Body))
					}
				}
			})
		}
	})
}

// TestRefusalNamesWhoCan: a refused page says the role, what it cannot do, who can, and whom to ask;
// the pages offer only the forms the role may use.
func TestRefusalNamesWhoCan(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		owner := signUpVerified(t, s, "opal@example.com")
		billing := addMember(t, s, owner, "bill@example.com", "billing")
		viewer := addMember(t, s, owner, "vic@example.com", "viewer")
		dev := addMember(t, s, owner, "dana@example.com", "developer")

		p := billing.get("/console/keys")
		if p.Status != 403 {
			t.Fatalf("billing on the keys page: %d", p.Status)
		}
		p.contains(t, "Your role (billing) cannot see API keys.", "Ask opal@example.com")
		// Neither the navigation nor the dashboard's first steps send billing to a page it cannot see.
		dash := billing.get("/console")
		dash.lacks(t, `href="/console/keys"`)
		dash.contains(t, "Ask an owner, admin or developer member to create one.")
		p = viewer.post("/console/members", "/console/members", url.Values{"email": {"x@example.com"}, "role": {"viewer"}})
		if p.Status != 403 {
			t.Fatalf("a viewer inviting: %d", p.Status)
		}
		p.contains(t, "Your role (viewer) cannot invite, change or remove members. Only an owner or admin can.", "Ask opal@example.com")

		// Forms appear only for those who may use them.
		viewer.get("/console/members").lacks(t, "Invite someone", "Remove…")
		viewer.get("/console/keys").lacks(t, "Create a key", "Revoke…")
		viewer.get("/console/wallet").contains(t, "Your role (viewer) cannot add funds")
		hooks := viewer.get("/console/webhooks")
		hooks.contains(t, "Your role (viewer) can see the account's endpoints and their deliveries but not add, change or delete them: an owner, admin or developer can.")
		hooks.lacks(t, "Add an endpoint")
		w := dev.get("/console/wallet")
		w.contains(t, "Available", "History")
		w.lacks(t, "Add test funds", "Balance alerts")
		billing.get("/console/wallet").contains(t, "Add test funds", "Balance alerts")
		owner.get("/console/members").contains(t, "Invite someone", "Remove…", "Change role")
		// An admin sees no owner in its role choices.
		admin := addMember(t, s, owner, "adele@example.com", "admin")
		am := admin.get("/console/members")
		if strings.Contains(am.Body, `<option value="owner"`) || strings.Contains(am.Body, `<option value="billing"`) {
			t.Fatal("an admin is offered to make an owner or a billing member")
		}
		// Billing's money powers are no admin's to hand out: not to a newcomer, not to a second address of
		// their own, not to themselves, not to an existing member.
		if p := admin.post("/console/members", "/console/members", url.Values{"email": {"adele+money@example.com"}, "role": {"billing"}}); p.Status != 403 ||
			!strings.Contains(p.Body, "Only an owner can invite an owner or a billing member") {
			t.Fatalf("an admin inviting billing: %d", p.Status)
		}
		adele, dana := userByEmail(t, s, "adele@example.com"), userByEmail(t, s, "dana@example.com")
		for _, id := range []int64{adele.ID, dana.ID} {
			if p := admin.post("/console/members", fmt.Sprintf("/console/members/%d/role", id), url.Values{"role": {"billing"}}); p.Status != 403 {
				t.Fatalf("an admin making member %d billing: %d", id, p.Status)
			}
		}
		if u := userByEmail(t, s, "adele@example.com"); u.AccountRole != "admin" {
			t.Fatalf("the admin became %s", u.AccountRole)
		}
		opal := userByEmail(t, s, "opal@example.com")
		if p := admin.post("/console/members", fmt.Sprintf("/console/members/%d/role", opal.ID), url.Values{"role": {"viewer"}}); p.Status != 403 ||
			!strings.Contains(p.Body, "Only an owner can change an owner") {
			t.Fatalf("an admin demoting the owner: %d", p.Status)
		}
		if p := admin.get(fmt.Sprintf("/console/members/%d/remove", opal.ID)); p.Status != 403 || !strings.Contains(p.Body, "Only an owner can remove an owner") {
			t.Fatalf("an admin opening the owner's removal: %d", p.Status)
		}
		if p := admin.post("/console/members", "/console/members", url.Values{"email": {"boss2@example.com"}, "role": {"owner"}}); p.Status != 403 {
			t.Fatalf("an admin inviting an owner: %d", p.Status)
		}
	})
}

// TestLastOwnerStays: the last owner can neither leave nor be demoted; two owners demoting each other at
// the same moment leave exactly one owner.
func TestLastOwnerStays(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		owner := signUpVerified(t, s, "only@example.com")
		me := userByEmail(t, s, "only@example.com")
		p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/role", me.ID), url.Values{"role": {"admin"}})
		if p.Status != 409 || !strings.Contains(p.Body, "without an owner") {
			t.Fatalf("the last owner demoting themselves: %d\n%s", p.Status, trimPage(p.Body))
		}
		owner.get("/console/members/leave").contains(t, "only owner")
		if p := owner.post("/console/members/leave", "/console/members/leave", url.Values{}); p.Status != 409 {
			t.Fatalf("the last owner leaving: %d", p.Status)
		}

		second := addMember(t, s, owner, "second@example.com", "owner")
		you := userByEmail(t, s, "second@example.com")
		for round := range 3 {
			var wg sync.WaitGroup
			statuses := make([]int, 2)
			for i, pair := range []struct {
				b  *browser
				id int64
			}{{owner, you.ID}, {second, me.ID}} {
				form := url.Values{"role": {"viewer"}, "_csrf": {csrfOf(t, pair.b, "/console/members")}}
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses[i] = pair.b.postRaw(fmt.Sprintf("/console/members/%d/role", pair.id), form).Status
				}()
			}
			wg.Wait()
			var owners int64
			s.DB.R.Model(&models.User{}).Where("account_id = ? AND account_role = 'owner' AND removed_at IS NULL", me.AccountID).Count(&owners)
			slices.Sort(statuses)
			if owners != 1 || statuses[0] != 303 || (statuses[1] != 403 && statuses[1] != 409) {
				t.Fatalf("round %d: owners demoting each other at once: %v, %d owners left", round, statuses, owners)
			}
			// The one still owner makes the other owner again.
			for _, pair := range []struct {
				b  *browser
				id int64
			}{{owner, you.ID}, {second, me.ID}} {
				if p := pair.b.post("/console/members", fmt.Sprintf("/console/members/%d/role", pair.id), url.Values{"role": {"owner"}}); p.Status == 303 {
					break
				}
			}
		}
	})
}

// TestRemovedMemberIsSignedOut: removing a member ends their sessions — their very next request is
// signed out — and they cannot sign in again; the keys they made keep working unless the owner asks
// to revoke them too. Leaving works the same for the one who leaves.
func TestRemovedMemberIsSignedOut(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "API_KEY_CACHE_TTL": "1h"})
		owner := signUpVerified(t, s, "rita@example.com")
		dev := addMember(t, s, owner, "dev1@example.com", "developer")
		devKey := createKey(t, dev, "dev1's")
		dev2 := addMember(t, s, owner, "dev2@example.com", "developer")
		dev2Key := createKey(t, dev2, "dev2's")
		// The key is known to the cache before the removal.
		if r := s.Do(t, "GET", "/v1/models", dev2Key, nil); r.Status != 200 {
			t.Fatalf("dev2's key: %d", r.Status)
		}

		u1, u2 := userByEmail(t, s, "dev1@example.com"), userByEmail(t, s, "dev2@example.com")
		owner.get(fmt.Sprintf("/console/members/%d/remove", u1.ID)).contains(t, "Remove dev1@example.com?", devKey[:11], "Also revoke their keys")
		// Removed without their keys: the key keeps working.
		p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/remove", u1.ID), url.Values{})
		if p.Status != 303 || p.location() != "/console/members?notice=member-removed" {
			t.Fatalf("remove: %d %s", p.Status, p.location())
		}
		if p := dev.get("/console"); p.Status != 303 || !strings.HasPrefix(p.location(), "/signin") {
			t.Fatalf("the removed member's next request: %d %s", p.Status, p.location())
		}
		si := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"dev1@example.com"}, "password": {"paper-boats-float-42"}})
		if si.Status != 403 || !strings.Contains(si.Body, "You were removed from this account") {
			t.Fatalf("the removed member signing in: %d", si.Status)
		}
		if r := s.Do(t, "GET", "/v1/models", devKey, nil); r.Status != 200 {
			t.Fatalf("the removed member's key, not revoked: %d", r.Status)
		}
		owner.get("/console/members").contains(t, "Former members", "dev1@example.com")
		owner.get("/console/keys").contains(t, "created by dev1@example.com")

		// Removed with their keys: revoked at once, on this instance although keys are cached for an hour.
		if p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/remove", u2.ID), url.Values{"revoke_keys": {"1"}}); p.Status != 303 {
			t.Fatalf("remove with keys: %d", p.Status)
		}
		if r := s.Do(t, "GET", "/v1/models", dev2Key, nil); r.Status != 401 {
			t.Fatalf("the removed member's revoked key: %d", r.Status)
		}
		owner.get("/console/keys").contains(t, "UTC by rita@example.com</span>") // who removed them revoked it
		if p := dev2.get("/console/keys"); p.Status != 303 {
			t.Fatalf("the second removed member's next request: %d", p.Status)
		}

		// Invited again, a former member comes back.
		back := addMember(t, s, owner, "dev1@example.com", "viewer")
		back.get("/console").contains(t, "dev1@example.com")
		if u := userByEmail(t, s, "dev1@example.com"); u.ID != u1.ID || u.AccountRole != "viewer" || u.Removed() {
			t.Fatalf("the former member back: %+v", u)
		}

		// Leaving: signed out, and out.
		if p := back.post("/console/members/leave", "/console/members/leave", url.Values{}); p.Status != 303 || p.location() != "/signin?notice=left-account" {
			t.Fatalf("leave: %d %s", p.Status, p.location())
		}
		if p := back.get("/console"); p.Status != 303 {
			t.Fatalf("after leaving: %d", p.Status)
		}
	})
}

// TestMembersShownWhereTheyActed: the wallet's ledger names who added funds and whose key made each
// video's charge, the keys page who created each key, and the call log the member behind each call's
// key; staff see the members of an account, their roles, and its pending invitations.
func TestMembersShownWhereTheyActed(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1"})
		owner := signUpVerified(t, s, "omar@example.com")
		billing := addMember(t, s, owner, "bea@example.com", "billing")
		dev := addMember(t, s, owner, "dan@example.com", "developer")
		addFunds(t, billing, "20")
		key := createKey(t, dev, "dan's server")
		v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "who made me", "seconds": 4})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed")

		w := owner.get("/console/wallet")
		w.contains(t, "Test funds", "by bea@example.com", "Charged for a video", "by dan@example.com")
		owner.get("/console/keys").contains(t, "dan's server", "created by dan@example.com")
		owner.get("/console/tasks/"+v["id"].(string)).contains(t, "by dan@example.com")
		testkit.Eventually(t, 10*time.Second, "the call in the call log with its member", func() bool {
			return strings.Contains(owner.get("/console/calls").Body, "dan@example.com")
		})

		invite(t, s, owner, "pending@example.com", "viewer")
		sup := signInStaff(t, s, "staff@example.com", "support")
		acct := userByEmail(t, s, "omar@example.com").AccountID
		p := sup.get(fmt.Sprintf("/support/accounts/%d", acct))
		p.contains(t, "Members", "omar@example.com", "bea@example.com", "billing", "dan@example.com", "developer",
			"Pending invitations", "pending@example.com", "invited by omar@example.com")
		p.lacks(t, "Invite someone")
	})
}

// TestRemovedMemberJoinsAnotherAccount: an address removed from one account is no dead end: another
// account may invite it, and accepting moves the same user row there (new role, signed in). The first
// account's pages keep naming the address where it acted (its keys' "created by").
func TestRemovedMemberJoinsAnotherAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		ownerA := signUpVerified(t, s, "anna@example.com")
		ownerB := signUpVerified(t, s, "boris@example.com")
		dev := addMember(t, s, ownerA, "drifter@example.com", "developer")
		createKey(t, dev, "drifter's server")
		was := userByEmail(t, s, "drifter@example.com")
		if p := ownerA.post("/console/members", fmt.Sprintf("/console/members/%d/remove", was.ID), url.Values{}); p.Status != 303 {
			t.Fatalf("remove: %d", p.Status)
		}

		moved := addMember(t, s, ownerB, "drifter@example.com", "viewer")
		moved.get("/console").contains(t, "drifter@example.com")
		moved.get("/console/members").contains(t, "boris@example.com")
		u := userByEmail(t, s, "drifter@example.com")
		if u.ID != was.ID || u.AccountID != userByEmail(t, s, "boris@example.com").AccountID || u.AccountRole != "viewer" || u.Removed() {
			t.Fatalf("the moved member: %+v", u)
		}
		// Account A still names them where they acted, and lists them no more.
		ownerA.get("/console/keys").contains(t, "drifter's server", "created by drifter@example.com")
		if p := ownerA.get("/console/members"); p.Status != 200 || strings.Contains(p.Body, "Former members") {
			t.Fatalf("account A's members page: %d\n%s", p.Status, trimPage(p.Body))
		}
		// A current member of another account stays where they are: its page says so.
		link := invite(t, s, ownerA, "drifter@example.com", "developer")
		if p := newBrowser(t, s).get(link); p.Status != 409 || !strings.Contains(p.Body, "already signs in to another videogen account") {
			t.Fatalf("inviting the moved member back: %d", p.Status)
		}
	})
}

// TestRemoveWithKeysWhileCreating: removing a member with "Also revoke their keys" while videos are
// being created through a spend-limited key of theirs never deadlocks (PostgreSQL: a create locks the
// key's row, then the account's; the removal takes them in the same order) — every answer is a 2xx, 3xx
// or 4xx, round after round, and the key ends revoked.
func TestRemoveWithKeysWhileCreating(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		owner := signUpVerified(t, s, "rhea@example.com")
		addFunds(t, owner, "500")
		for round := range 5 {
			email := fmt.Sprintf("racer-%d@example.com", round) // one address per round: e-mails to an address are throttled
			dev := addMember(t, s, owner, email, "developer")
			key := createKey(t, dev, fmt.Sprintf("racer's %d", round))
			var k models.APIKey
			s.DB.R.Where("prefix = ?", key[:11]).Take(&k)
			if p := dev.post("/console/keys", fmt.Sprintf("/console/keys/%d/limits", k.ID), url.Values{"spend_limit_usd": {"100"}, "limit_period": {"day"}}); p.Status != 303 {
				t.Fatalf("round %d: set the key's limit: %d", round, p.Status)
			}
			me := userByEmail(t, s, email)
			form := url.Values{"revoke_keys": {"1"}, "_csrf": {csrfOf(t, owner, "/console/members")}}
			const creates = 6
			statuses := make([]int, creates+1)
			var wg sync.WaitGroup
			for i := range creates {
				wg.Add(1)
				go func() {
					defer wg.Done()
					statuses[i] = s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("race %d.%d", round, i), "seconds": 4}).Status
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[creates] = owner.postRaw(fmt.Sprintf("/console/members/%d/remove", me.ID), form).Status
			}()
			wg.Wait()
			for i, st := range statuses {
				if st >= 500 {
					t.Fatalf("round %d: answer %d of %v is a %d", round, i, statuses, st)
				}
			}
			if statuses[creates] != 303 {
				t.Fatalf("round %d: the removal answered %d", round, statuses[creates])
			}
			if r := s.Do(t, "GET", "/v1/models", key, nil); r.Status != 401 {
				t.Fatalf("round %d: the removed member's key after revocation: %d", round, r.Status)
			}
		}
	})
}

// TestInvitationsEndWithTheirSender: an invitation carries the authority of whoever sent it. Removing the
// sender withdraws every invitation they sent (the confirmation page says how many), and so does their
// leaving; demoting them withdraws those their new role may not give (an owner made admin keeps their
// admin invitations, loses the owner one; an admin made viewer loses all). A withdrawn link's page and
// form answer 410 and make nobody a member. And an invitation whose sender lost the right some other way
// (as rows from before these withdrawals are) is checked when it is accepted: refused, withdrawn.
func TestInvitationsEndWithTheirSender(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		owner := signUpVerified(t, s, "olga@example.com")
		admin := addMember(t, s, owner, "adam@example.com", "admin")
		adam := userByEmail(t, s, "adam@example.com")

		// Removed: the admin's invitation to alt@evil.test as admin dies with the removal.
		alt := invite(t, s, admin, "alt@evil.test", "admin")
		keep := invite(t, s, owner, "kept@example.com", "viewer") // the owner's own: untouched
		owner.get(fmt.Sprintf("/console/members/%d/remove", adam.ID)).contains(t, "The 1 invitation(s) they sent", "withdrawn with them")
		if p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/remove", adam.ID), url.Values{}); p.Status != 303 {
			t.Fatalf("remove the admin: %d", p.Status)
		}
		refusedJoin := func(link, email string) {
			t.Helper()
			b := newBrowser(t, s)
			if p := b.get(link); p.Status != 410 || !strings.Contains(p.Body, "may no longer give that role") {
				t.Fatalf("the page of %s's invitation whose sender lost the right: %d\n%s", email, p.Status, trimPage(p.Body))
			}
			p := b.postRaw("/invite", url.Values{"_csrf": {csrfOf(t, b, "/signin")}, "token": {tokenOf(link)}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
			if p.Status != 410 {
				t.Fatalf("accepting %s's invitation whose sender lost the right: %d", email, p.Status)
			}
			var n int64
			s.DB.R.Model(&models.User{}).Where("email = ?", email).Count(&n)
			if n != 0 {
				t.Fatalf("%s became a user", email)
			}
		}
		refusedJoin(alt, "alt@evil.test")
		list := owner.get("/console/members")
		list.contains(t, "kept@example.com")
		list.lacks(t, "alt@evil.test")
		join(t, s, keep)

		// Demoted: an owner made admin keeps the admin invitation they sent and loses the owner one; an
		// admin made viewer loses all of theirs.
		second := addMember(t, s, owner, "sam@example.com", "owner")
		sam := userByEmail(t, s, "sam@example.com")
		asOwner := invite(t, s, second, "boss@evil.test", "owner")
		asAdmin := invite(t, s, second, "helper@example.com", "admin")
		if p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/role", sam.ID), url.Values{"role": {"admin"}}); p.Status != 303 {
			t.Fatalf("demote the second owner: %d", p.Status)
		}
		refusedJoin(asOwner, "boss@evil.test")
		newBrowser(t, s).get(asAdmin).contains(t, "Join ", "Choose your password")
		if p := owner.post("/console/members", fmt.Sprintf("/console/members/%d/role", sam.ID), url.Values{"role": {"viewer"}}); p.Status != 303 {
			t.Fatalf("demote to viewer: %d", p.Status)
		}
		refusedJoin(asAdmin, "helper@example.com")

		// Leaving withdraws too.
		leaver := addMember(t, s, owner, "lea@example.com", "admin")
		left := invite(t, s, leaver, "friend@example.com", "developer")
		if p := leaver.post("/console/members/leave", "/console/members/leave", url.Values{}); p.Status != 303 {
			t.Fatalf("leave: %d", p.Status)
		}
		refusedJoin(left, "friend@example.com")

		// Checked when accepted: a pending invitation of a sender whose role was lowered without a
		// withdrawal — rows written before withdrawals existed — is refused and withdrawn then.
		third := addMember(t, s, owner, "tess@example.com", "admin")
		stale := invite(t, s, third, "late@evil.test", "admin")
		if err := s.DB.W.Exec("UPDATE users SET account_role = 'developer' WHERE email = 'tess@example.com'").Error; err != nil {
			t.Fatal(err)
		}
		refusedJoin(stale, "late@evil.test")
		var inv models.Invitation
		s.DB.R.Where("email = ?", "late@evil.test").Take(&inv)
		if inv.AcceptedAt != nil || inv.RevokedAt == nil {
			t.Fatalf("the stale invitation after a refused accept: accepted %v, withdrawn %v", inv.AcceptedAt, inv.RevokedAt)
		}
	})
}

// TestInvitationsPerDay: the pending cap (50) bounds what waits, not what is mailed — withdrawing and
// inviting again used to send any number of e-mails to strangers. An account sends at most 100
// invitations in any 24 hours, withdrawn ones included; the 101st is refused (429) with the time the
// next may go out, in the member's own time zone, and nothing is mailed. A day on, it goes out.
func TestInvitationsPerDay(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		var offset atomic.Int64
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"},
			server.Options{Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
		owner := signUpVerified(t, s, "hr@example.com")
		owner.submit("/console/account", "tz", url.Values{"tz": {"Asia/Tokyo"}})
		csrf := csrfOf(t, owner, "/console/members")
		send := func(i int) *page {
			return owner.postRaw("/console/members", url.Values{"_csrf": {csrf}, "email": {fmt.Sprintf("stranger-%d@example.com", i)}, "role": {"viewer"}})
		}
		for round := range 2 {
			for i := range members.MaxPending {
				if p := send(round*members.MaxPending + i); p.Status != 303 {
					t.Fatalf("invitation %d: %d\n%s", round*members.MaxPending+i+1, p.Status, trimPage(p.Body))
				}
			}
			var pending []models.Invitation
			s.DB.R.Where("revoked_at IS NULL AND accepted_at IS NULL").Find(&pending)
			for _, in := range pending {
				if p := owner.postRaw(fmt.Sprintf("/console/members/invitations/%d/withdraw", in.ID), url.Values{"_csrf": {csrf}}); p.Status != 303 {
					t.Fatalf("withdraw %d: %d", in.ID, p.Status)
				}
			}
		}
		var first models.Invitation
		s.DB.R.Order("created_at, id").Take(&first)
		p := send(1000)
		next := first.CreatedAt.Add(members.SendWindow).In(time.FixedZone("JST", 9*3600)).Format("2006-01-02 15:04:05 MST")
		if p.Status != 429 || p.Header.Get("Retry-After") == "" || !strings.Contains(p.Body, "sent 100 invitations in the last 24 hours") ||
			!strings.Contains(p.Body, "You can send the next one after "+next) {
			t.Fatalf("the 101st invitation of the day: %d (Retry-After %q), want 429 naming %s\n%s", p.Status, p.Header.Get("Retry-After"), next, trimPage(p.Body))
		}
		var n int64
		s.DB.R.Model(&models.Invitation{}).Where("email = ?", "stranger-1000@example.com").Count(&n)
		if n != 0 {
			t.Fatal("the refused invitation was recorded")
		}
		offset.Store(int64(members.SendWindow + time.Minute))
		if p := send(1000); p.Status != 303 {
			t.Fatalf("an invitation a day later: %d\n%s", p.Status, trimPage(p.Body))
		}
		nextMail(t, s, "stranger-1000@example.com", 0)
	})
}
