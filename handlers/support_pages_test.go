package handlers_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestSupportIsHiddenFromEveryoneElse: signed-out visitors and members get, on every staff page, the
// very page an unknown path gets.
func TestSupportIsHiddenFromEveryoneElse(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		member := signUpVerified(t, s, "member@example.com")
		anon := newBrowser(t, s)
		unknown := anon.get("/no-such-page")
		if unknown.Status != 404 {
			t.Fatalf("unknown path: %d", unknown.Status)
		}
		same := func(what string, got *page) {
			t.Helper()
			if got.Status != 404 || trimPage(got.Body) != trimPage(unknown.Body) {
				t.Errorf("%s: %d, and the page differs from an unknown path's: %s", what, got.Status, trimPage(got.Body))
			}
			for _, h := range []string{"Set-Cookie", "Cache-Control"} {
				if got.Header.Get(h) != unknown.Header.Get(h) {
					t.Errorf("%s: %s %q, an unknown path's %q", what, h, got.Header.Get(h), unknown.Header.Get(h))
				}
			}
		}
		paths := []string{"/support", "/support/", "/support/search?q=x", "/support/2fa", "/support/2fa/setup",
			fmt.Sprintf("/support/accounts/%d", acct.ID), fmt.Sprintf("/support/accounts/%d/calls.csv", acct.ID),
			"/support/calls/req_x", "/support/tasks/video_x", "/support/audit", "/support/prices"}
		for _, b := range []*browser{anon, member} {
			for _, p := range paths {
				same("GET "+p, b.get(p))
				// A form posted without its token is no different: the page is not there.
				same("POST "+p, b.postRaw(p, url.Values{"reason": {"x"}}))
			}
		}
		if got := member.post("/console", fmt.Sprintf("/support/accounts/%d/balance", acct.ID), url.Values{"amount": {"5"}, "reason": {"x"}}); got.Status != 404 {
			t.Errorf("a member's POST to an admin form: %d", got.Status)
		}
		var n int64
		s.DB.R.Model(&models.AuditEntry{}).Count(&n)
		if n != 0 {
			t.Errorf("%d audit rows from visitors who are not staff", n)
		}
	})
}

// TestStaffSearch: one box finds an account by e-mail prefix, account id, key prefix, task id, media id
// or request id, and goes straight to the match when there is exactly one.
func TestStaffSearch(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "100ms"})
		a := s.NewAccount(t, "10")
		b := s.NewAccount(t, "10")
		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		task := s.CreateVideo(t, a.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a cat"})["id"].(string)
		poll := s.Do(t, "GET", "/v1/videos/"+task, a.Key, nil)
		waitCall(t, s, poll.Header.Get("X-Request-Id"))
		upload := s.Upload(t, b.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 16, 16))).Answer(t)
		var key models.APIKey
		if err := s.DB.R.Where("account_id = ?", a.ID).Take(&key).Error; err != nil {
			t.Fatal(err)
		}
		accountA := fmt.Sprintf("/support/accounts/%d", a.ID)
		cases := []struct {
			name, q, to string
		}{
			{"whole e-mail", a.Email, accountA},
			{"e-mail prefix, any case", strings.ToUpper(a.Email[:len(a.Email)-4]), accountA},
			{"account id", fmt.Sprint(b.ID), fmt.Sprintf("/support/accounts/%d", b.ID)},
			{"account id with #", fmt.Sprintf("#%d", a.ID), accountA},
			{"key prefix", key.Prefix, accountA},
			{"whole key pasted", a.Key, accountA},
			{"whole key in a header line", "Authorization: Bearer " + a.Key, accountA},
			{"task id", task, accountA + "/tasks/" + task},
			{"media id", upload.Files[0].ID, fmt.Sprintf("/support/accounts/%d", b.ID)},
			{"request id", poll.Header.Get("X-Request-Id"), "/support/calls/" + poll.Header.Get("X-Request-Id")},
			{"spaces around", "  " + task + " ", accountA + "/tasks/" + task},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				got := sup.get("/support/search?q=" + url.QueryEscape(c.q))
				if got.Status != 303 || got.location() != c.to {
					t.Fatalf("q=%q: %d → %q, want 303 → %q", c.q, got.Status, got.location(), c.to)
				}
			})
		}
		// Several matches are listed; none says what to try.
		signUpVerified(t, s, "twin-one@example.com")
		signUpVerified(t, s, "twin-two@example.com")
		list := sup.get("/support/search?q=twin-")
		if list.Status != 200 {
			t.Fatalf("two matches: %d", list.Status)
		}
		list.contains(t, "twin-one@example.com", "twin-two@example.com")
		for _, q := range []string{strings.Repeat("é", 200), "%_%", `\`} {
			if got := sup.get("/support/search?q=" + url.QueryEscape(q)); got.Status != 200 {
				t.Errorf("q=%q: %d", q, got.Status)
			}
		}
		// What trims to nothing is an empty query: the search form and its hint, no list of users, nothing
		// audited. A NUL or another control character is refused with 400, not dropped and searched.
		for _, q := range []string{" ", "\t", "  \n ", "\u00a0"} {
			got := sup.get("/support/search?q=" + url.QueryEscape(q))
			if got.Status != 200 || strings.Contains(got.Body, "twin-one@example.com") || !strings.Contains(got.Body, "Paste what the customer gave you") {
				t.Errorf("blank q=%q: %d, lists users or lacks the hint:\n%s", q, got.Status, trimPage(got.Body))
			}
		}
		for _, q := range []string{"\x00", "a\x00b", "twin-\x00", "twin\x01", "tw\nin", "\xff\xfe", "\u200b", "twin-\u202eeno"} {
			got := sup.get("/support/search?q=" + url.QueryEscape(q))
			if got.Status != 400 || strings.Contains(got.Body, "twin-one@example.com") {
				t.Errorf("q=%q: %d, want 400 and no matches:\n%s", q, got.Status, trimPage(got.Body))
			}
			got.contains(t, "Nothing was searched")
		}
		none := sup.get("/support/search?q=video_doesnotexist")
		none.contains(t, "Nothing matches")
		gone := sup.get("/support/search?q=req_nosuchrequest")
		gone.contains(t, "No call has this request id")
		// The search is audited, and a pasted key is kept as its prefix only.
		var rows []models.AuditEntry
		s.DB.R.Where("action = ?", "search").Find(&rows)
		if len(rows) != len(cases)+6 {
			t.Errorf("%d search rows in the audit log, want %d", len(rows), len(cases)+6)
		}
		for _, r := range rows {
			if strings.TrimSpace(r.Detail) == "" || strings.ContainsFunc(r.Detail, unicode.IsControl) {
				t.Errorf("audit row %+v: a search of nothing, or of a control character, was recorded", r)
			}
			if strings.Contains(r.Detail, a.Key) || r.Actor != sup.Email || r.IP == "" {
				t.Errorf("audit row %+v: a secret kept, or no actor or address", r)
			}
		}
	})
}

// TestStaffAccountPage: a tenant's page shows its users, balances, keys (never a secret), tasks, ledger
// with the running balance and calls; its tasks, calls and CSV are the customer's own pages, filters and
// pagination included; every look is audited; support sees no admin form.
func TestStaffAccountPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "100ms"})
		cust := signUpVerified(t, s, "owner@example.com")
		var owner models.User
		s.DB.R.Where("email = ?", "owner@example.com").Take(&owner)
		if err := creditUSD(s, owner.AccountID, "20"); err != nil {
			t.Fatal(err)
		}
		created := cust.submit("/console/keys", "name", url.Values{"name": {"prod"}})
		m := secretRE.FindStringSubmatch(created.Body)
		if m == nil {
			t.Fatalf("no new key shown: %s", trimPage(created.Body))
		}
		secret := m[1]
		var ids []string
		for i := 0; i < 3; i++ {
			ids = append(ids, s.CreateVideo(t, secret, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprint("clip ", i)})["id"].(string))
		}
		for _, id := range ids {
			s.WaitStatus(t, secret, id, 20*time.Second, "completed")
		}
		waitCall(t, s, s.Do(t, "GET", "/v1/videos/video_nope", secret, nil).Header.Get("X-Request-Id"))

		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		base := fmt.Sprintf("/support/accounts/%d", owner.AccountID)
		page := sup.get(base)
		if page.Status != 200 {
			t.Fatalf("account page: %d", page.Status)
		}
		page.contains(t, "owner@example.com", "member", "Available", "$20.00", "prod", secret[:11], ids[0], "/v1/videos/video_nope", "read-only")
		page.lacks(t, secret, `action="`+base+`/balance"`, `action="`+base+`/disable"`)
		// Each user's verification and last sign-in, in the staff member's time zone (UTC here).
		s.DB.R.Where("email = ?", "owner@example.com").Take(&owner)
		if owner.LastSignInAt == nil || owner.EmailVerifiedAt == nil {
			t.Fatal("the owner's sign-in or verification was not recorded")
		}
		page.contains(t, owner.LastSignInAt.UTC().Format("2006-01-02 15:04:05 UTC"), owner.EmailVerifiedAt.UTC().Format("2006-01-02 15:04:05 UTC"))

		// The customer's own task list, filters and pagination, scoped to this account.
		tasks := sup.get(base + "/tasks?status=completed")
		tasks.contains(t, ids[0], ids[1], ids[2], "Staff view")
		if got := sup.get(base + "/tasks?status=failed"); strings.Contains(got.Body, ids[0]) {
			t.Error("the status filter did not apply on the staff task list")
		}
		task := sup.get(base + "/tasks/" + ids[0])
		task.contains(t, "What happened", "Charged $", "settled", "Upstream credential")
		// Another account's task is not found under this one.
		other := s.NewAccount(t, "5")
		otherTask := s.CreateVideo(t, other.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "x"})["id"].(string)
		if got := sup.get(base + "/tasks/" + otherTask); got.Status != 404 {
			t.Errorf("another account's task under this account: %d", got.Status)
		}
		calls := sup.get(base + "/calls?class=4xx")
		calls.contains(t, "/v1/videos/video_nope", "not_found")
		calls.lacks(t, "POST /v1/videos")
		csv := sup.get(base + "/calls.csv")
		if csv.Status != 200 || !strings.Contains(csv.Body, "/v1/videos/video_nope") || strings.Contains(csv.Body, otherTask) {
			t.Fatalf("CSV export: %d %s", csv.Status, csv.Body)
		}
		ledger := sup.get(base + "/ledger")
		ledger.contains(t, "Available after", "$20.00")

		var actions []string
		s.DB.R.Model(&models.AuditEntry{}).Where("actor = ? AND account_id = ?", sup.Email, owner.AccountID).Order("id").Pluck("action", &actions)
		want := []string{"account.view", "tasks.view", "tasks.view", "task.view", "calls.view", "calls.export", "ledger.view"}
		if strings.Join(actions, " ") != strings.Join(want, " ") {
			t.Errorf("audited looks: %v, want %v", actions, want)
		}
		// The customer's own pages are unchanged, and record nothing.
		cust.get("/console/tasks").contains(t, ids[0])
		cust.get("/console/calls").contains(t, "/v1/videos/video_nope")
		var n int64
		s.DB.R.Model(&models.AuditEntry{}).Where("actor = ?", "owner@example.com").Count(&n)
		if n != 0 {
			t.Errorf("the customer's own looks were audited: %d", n)
		}
		if got := sup.get("/support/accounts/999999"); got.Status != 404 {
			t.Errorf("an account that does not exist: %d", got.Status)
		}
	})
}

// TestStaffOpensACallFromItsRequestID: the X-Request-Id of a failed task's create opens that call, its
// task with the log, billing state, credential and upstream id, its ledger entries, and a sentence
// saying why the customer was not charged.
func TestStaffOpensACallFromItsRequestID(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "100ms"})
		acct := s.NewAccount(t, "10")
		create := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "doomed [sim:fail]"})
		if create.Status != 200 {
			t.Fatalf("create: %d", create.Status)
		}
		rid := create.Header.Get("X-Request-Id")
		waitCall(t, s, rid)
		id := create.JSON(t)["id"].(string)
		s.WaitStatus(t, acct.Key, id, 20*time.Second, "failed")
		task := testkit.Task(t, s.DB, id)
		var cred models.UpstreamCredential
		s.DB.R.Where("id = ?", *task.CredentialID).Take(&cred)

		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		page := sup.get("/support/calls/" + rid)
		if page.Status != 200 {
			t.Fatalf("call page: %d", page.Status)
		}
		page.contains(t, rid, "POST /v1/videos", "200", fmt.Sprintf("#%d", acct.ID), acct.Key[:11]+"…", id,
			"Not charged: the task failed", "released", cred.Label, *task.UpstreamTaskID, "reserve", "release", " ms")
		page.lacks(t, acct.Key)
		if got := sup.get("/support/calls/req_doesnotexist"); got.Status != 404 {
			t.Errorf("an unknown request id: %d", got.Status)
		}
		var n int64
		s.DB.R.Model(&models.AuditEntry{}).Where("action = ? AND target_id = ? AND account_id = ?", "call.view", rid, acct.ID).Count(&n)
		if n != 1 {
			t.Errorf("the opened call was audited %d times", n)
		}
	})
}

// TestAuditLogPage: admins read the audit log, filtered; support staff cannot; no code path changes it
// and the database refuses to.
func TestAuditLogPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
		adm := signInStaff(t, s, "boss@example.com", models.RoleAdmin)
		sup.get(fmt.Sprintf("/support/accounts/%d", acct.ID))
		if got := sup.get("/support/audit"); got.Status != 404 {
			t.Errorf("support staff read the audit log: %d", got.Status)
		}
		page := adm.get("/support/audit?actor=" + url.QueryEscape(sup.Email))
		page.contains(t, "account.view", sup.Email, fmt.Sprintf("account #%d", acct.ID))
		page.lacks(t, "<td>"+adm.Email+"</td>")
		if got := adm.get("/support/audit?action=balance."); strings.Contains(got.Body, "<code>account.view</code>") {
			t.Error("the action filter did not apply")
		}
		for _, bad := range []string{"abc", "-5", "99999999999999999999"} {
			got := adm.get("/support/audit?account=" + bad)
			if !strings.Contains(got.Body, "Account id is a number") || !strings.Contains(got.Body, "<code>account.view</code>") {
				t.Errorf("account=%s is not explained and ignored", bad)
			}
		}
		if got := adm.get("/support/audit?action=" + url.QueryEscape("%.")); strings.Contains(got.Body, "<code>account.view</code>") {
			t.Error("a % in the action filter matched as a wildcard")
		}
		for _, stmt := range []string{"UPDATE audit_log SET actor = 'nobody'", "DELETE FROM audit_log"} {
			if err := s.DB.W.Exec(stmt).Error; err == nil {
				t.Errorf("the database let %q through", stmt)
			}
		}
		var n int64
		s.DB.R.Model(&models.AuditEntry{}).Where("actor = 'nobody'").Count(&n)
		if n != 0 {
			t.Error("an audit row was changed")
		}
	})
}
