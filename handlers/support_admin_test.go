package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"videogen/internal/testkit"
	"videogen/models"
)

// BenchmarkCreateVideo measures POST /v1/videos end to end (authenticate, price, reserve, insert, call
// log) with 16 clients, on SQLite and, with TEST_DATABASE_URL, PostgreSQL: the cost of reading the price
// table on every create rather than from a per-instance cache.
func BenchmarkCreateVideo(b *testing.B) {
	engines := map[string]func(testing.TB) string{"sqlite": testkit.SQLiteURL}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		engines["postgres"] = testkit.PostgresURL
	}
	for name, url := range engines {
		b.Run(name, func(b *testing.B) {
			s := testkit.Start(b, url(b), map[string]string{"WORKERS": "false", "MAX_QUEUED_PER_ACCOUNT": "10000000"})
			acct := s.NewAccount(b, "100000000")
			body := `{"model":"videogen-2.0-mini-480p","prompt":"a benchmark"}`
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", s.URL+"/v1/videos", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+acct.Key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Errorf("create: %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// admForm posts a form the way a page of the console would, with the browser's CSRF token (any page's
// token is the browser's; /console is one every signed-in user has).
func admForm(b *browser, path string, form url.Values) *page {
	b.t.Helper()
	return b.post("/console", path, form)
}

// admConfirm presses the button of a confirmation page: it posts the page's form that carries
// confirm=yes, with its hidden fields and extra (a ticked box).
func admConfirm(t *testing.T, b *browser, p *page, extra url.Values) *page {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(p.Body))
	if err != nil {
		t.Fatal(err)
	}
	var action string
	var fields url.Values
	var walk func(n *html.Node, form *html.Node)
	walk = func(n *html.Node, form *html.Node) {
		if n.Type == html.ElementNode && n.Data == "form" {
			form = n
		}
		if form != nil && n.Type == html.ElementNode && n.Data == "input" && attrOf(n, "name") == "confirm" && attrOf(n, "value") == "yes" {
			action, fields = attrOf(form, "action"), url.Values{}
			var hidden func(*html.Node)
			hidden = func(n *html.Node) {
				if n.Type == html.ElementNode && n.Data == "input" && attrOf(n, "type") == "hidden" {
					fields.Add(attrOf(n, "name"), attrOf(n, "value"))
				}
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					hidden(c)
				}
			}
			hidden(form)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, form)
		}
	}
	walk(doc, nil)
	if action == "" {
		t.Fatalf("no confirmation form (status %d):\n%s", p.Status, trimPage(p.Body))
	}
	for k, v := range extra {
		fields[k] = v
	}
	return b.postRaw(action, fields)
}

// admAudit returns the audit rows of an action, oldest first.
func admAudit(t *testing.T, s *testkit.Server, action string) []models.AuditEntry {
	t.Helper()
	var rows []models.AuditEntry
	if err := s.DB.R.Where("action = ?", action).Order("id").Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	return rows
}

func admAccount(t *testing.T, s *testkit.Server, id int64) models.Account {
	t.Helper()
	var a models.Account
	if err := s.DB.R.Take(&a, id).Error; err != nil {
		t.Fatal(err)
	}
	return a
}

func admUser(t *testing.T, s *testkit.Server, email string) models.User {
	t.Helper()
	var u models.User
	if err := s.DB.R.Where("email = ?", email).Take(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

// admStatus fails the test unless the page has the status.
func (p *page) admStatus(t *testing.T, what string, want int) *page {
	t.Helper()
	if p.Status != want {
		t.Fatalf("%s: status %d, want %d:\n%s", what, p.Status, want, trimPage(p.Body))
	}
	return p
}

// TestAdminAdjustBalance: an admin credits and debits a tenant's balance through a confirmation page
// that states exactly what will happen; each adjustment is a ledger entry naming the staff member and
// the reason, with an audit row (actor, reason, client IP) written with it. A debit that takes available
// below zero needs the extra box; input that cannot be applied is shown again with 422 and changes
// nothing.
func TestAdminAdjustBalance(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		adm := signInStaff(t, s, "boss@example.com", "admin")
		cust := s.NewAccount(t, "10")
		base := "/support/accounts/" + strconv.FormatInt(cust.ID, 10)
		entries := func() []models.LedgerEntry {
			var es []models.LedgerEntry
			// The account's test funds first (testkit), then the adjustments.
			s.DB.R.Where("account_id = ? AND kind IN ?", cust.ID, []string{models.KindTestTopup, models.KindAdjustment}).Order("id").Find(&es)
			return es
		}
		available := func() int64 { return admAccount(t, s, cust.ID).AvailableMicros }

		for _, tc := range []struct{ direction, amount, reason, want string }{
			{"credit", "25", "", "Give a reason"},
			{"credit", "25", "   ", "Give a reason"},
			{"credit", "", "goodwill", "Enter an amount"},
			{"credit", "ten", "goodwill", "in dollars and cents"},
			{"credit", "0", "goodwill", "more than zero"},
			{"credit", "0.0000001", "goodwill", "in dollars and cents"},
			{"credit", "1.005", "goodwill", "Enter whole cents, such as $1.00"},
			{"credit", "100000.01", "goodwill", "the most one adjustment may move"},
			{"debit", "-5", "goodwill", "without a sign"},
			{"sideways", "5", "goodwill", "Choose credit or debit"},
		} {
			for _, confirm := range []string{"", "yes"} {
				p := admForm(adm.browser, base+"/balance", url.Values{"direction": {tc.direction}, "amount": {tc.amount}, "reason": {tc.reason}, "confirm": {confirm}})
				p.admStatus(t, fmt.Sprintf("%+v confirm=%q", tc, confirm), 422).contains(t, tc.want)
			}
		}
		if es := entries(); len(es) != 1 || available() != 10_000_000 {
			t.Fatalf("refused input changed the books: %d adjustments, available %d", len(es), available())
		}

		// The account page shows admins the forms, and support staff none of them.
		checkPage(t, base, adm.get(base).admStatus(t, "the account page", 200))
		adm.get(base).contains(t, "Admin actions", `action="`+base+`/balance"`, `action="`+base+`/disable"`, "/support/prices")
		sup := signInStaff(t, s, "helper@example.com", "support")
		sup.get(base).admStatus(t, "the account page for support", 200).lacks(t, "Admin actions", base+"/balance", base+"/disable", "/role")

		// A credit, from the account page's form: the first post states it, the second makes it.
		p := adm.submit(base, "amount", url.Values{"direction": {"credit"}, "amount": {"25"}, "reason": {"refund of ticket 7781"}, "customer_note": {"Refund for the failed batch"}})
		p.admStatus(t, "credit review", 200).contains(t, "Credit $25.00 to account "+strconv.FormatInt(cust.ID, 10)+" ("+cust.Email+")",
			"refund of ticket 7781", "$10.00 now, $35.00 after")
		checkPage(t, "credit confirmation", p)
		if available() != 10_000_000 {
			t.Fatal("the review moved money")
		}
		done := admConfirm(t, adm.browser, p, nil).admStatus(t, "credit confirmed", 303)
		if done.location() != base+"?notice=balance-adjusted" {
			t.Fatalf("after the credit: %q", done.location())
		}
		es := entries()
		if available() != 35_000_000 || len(es) != 2 || es[1].DeltaAvailable != 25_000_000 || es[1].Actor != "staff:boss@example.com" ||
			es[1].Reason != "refund of ticket 7781" || es[1].CustomerNote != "Refund for the failed batch" {
			t.Fatalf("after the credit: available %d, entries %+v", available(), es)
		}
		credits := admAudit(t, s, "balance.credit")
		boss := admUser(t, s, "boss@example.com")
		if len(credits) != 1 || credits[0].Actor != "boss@example.com" || credits[0].ActorUserID == nil || *credits[0].ActorUserID != boss.ID ||
			credits[0].IP != "127.0.0.1" || credits[0].Reason != "refund of ticket 7781" || credits[0].AccountID == nil || *credits[0].AccountID != cust.ID ||
			credits[0].TargetType != "account" || !strings.Contains(credits[0].Detail, "+$25.00; available $10.00 → $35.00") {
			t.Fatalf("audit of the credit: %+v", credits)
		}

		// A debit beyond available: said so, and refused without the box.
		p = admForm(adm.browser, base+"/balance", url.Values{"direction": {"debit"}, "amount": {"50"}, "reason": {"chargeback 3321"}})
		p.admStatus(t, "debit review", 200).contains(t, "Debit $50.00 from account", "below zero", "$35.00 → -$15.00", `name="allow_negative"`)
		checkPage(t, "debit confirmation", p)
		admConfirm(t, adm.browser, p, nil).admStatus(t, "debit without the box", 422).contains(t, "Tick the box")
		if available() != 35_000_000 || len(entries()) != 2 || len(admAudit(t, s, "balance.debit")) != 0 {
			t.Fatal("a debit below zero went through without the box")
		}
		admConfirm(t, adm.browser, p, url.Values{"allow_negative": {"yes"}}).admStatus(t, "debit with the box", 303)
		if available() != -15_000_000 || len(entries()) != 3 || entries()[2].DeltaAvailable != -50_000_000 {
			t.Fatalf("after the debit: available %d", available())
		}
		if debits := admAudit(t, s, "balance.debit"); len(debits) != 1 || debits[0].Reason != "chargeback 3321" {
			t.Fatalf("audit of the debit: %+v", debits)
		}
		// A debit within available needs no box.
		p = admForm(adm.browser, base+"/balance", url.Values{"direction": {"credit"}, "amount": {"20"}, "reason": {"settle the debt"}})
		admConfirm(t, adm.browser, p, nil).admStatus(t, "second credit", 303)
		p = admForm(adm.browser, base+"/balance", url.Values{"direction": {"debit"}, "amount": {"0.01"}, "reason": {"rounding"}})
		p.admStatus(t, "small debit review", 200).lacks(t, `name="allow_negative"`)
		admConfirm(t, adm.browser, p, nil).admStatus(t, "small debit", 303)
		if available() != 4_990_000 {
			t.Fatalf("available %d, want 4990000", available())
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestAdminFormsNeedAdminAndCSRF: support staff get the 404 of an unknown path on every admin form (and
// the price page), and a form without its CSRF token is refused 403 — both changing nothing.
func TestAdminFormsNeedAdminAndCSRF(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		adm := signInStaff(t, s, "boss@example.com", "admin")
		sup := signInStaff(t, s, "helper@example.com", "support")
		cust := s.NewAccount(t, "10")
		base := "/support/accounts/" + strconv.FormatInt(cust.ID, 10)
		victim := admUser(t, s, cust.Email)
		forms := []struct {
			path string
			form url.Values
		}{
			{base + "/balance", url.Values{"direction": {"credit"}, "amount": {"25"}, "reason": {"x"}, "confirm": {"yes"}}},
			{base + "/disable", url.Values{"reason": {"x"}, "confirm": {"yes"}}},
			{base + "/enable", url.Values{"reason": {"x"}}},
			{"/support/users/" + strconv.FormatInt(victim.ID, 10) + "/role", url.Values{"role": {"admin"}}},
			{"/support/prices", url.Values{"price_videogen-2.0-480p": {"0.01"}, "was_videogen-2.0-480p": {"150000"}, "reason": {"x"}, "confirm": {"yes"}}},
		}
		for _, f := range forms {
			admForm(sup.browser, f.path, f.form).admStatus(t, "support staff posting "+f.path, 404).contains(t, "Page not found")
			f.form.Del("_csrf")
			adm.postRaw(f.path, f.form).admStatus(t, "an admin form without its CSRF token: "+f.path, 403)
		}
		sup.get("/support/prices").admStatus(t, "support staff on the price page", 404)
		var audits int64
		s.DB.R.Model(&models.AuditEntry{}).Where("action IN ?", []string{"balance.credit", "balance.debit", "account.disable", "account.enable", "price.set", "role.set"}).Count(&audits)
		a := admAccount(t, s, cust.ID)
		var price models.Price
		s.DB.R.Take(&price, "model = ?", "videogen-2.0-480p")
		if audits != 0 || a.AvailableMicros != 10_000_000 || a.Disabled() || admUser(t, s, cust.Email).Role != "member" || price.MicrosPerSecond != 150_000 {
			t.Fatalf("refused forms changed something: %d audit rows, account %+v, price %d", audits, a, price.MicrosPerSecond)
		}
		if r := s.Do(t, "GET", "/v1/models", cust.Key, nil); r.Status != 200 {
			t.Fatalf("the key after refused forms: %d", r.Status)
		}
	})
}

// TestAdminDisableAccount: disabling, once confirmed with what it will do, refuses the account's key at
// once with 401 account_disabled (on /v1/videos and /v1/models), ends its console session, refuses its
// sign-in, fails its task still waiting for a slot with the reservation released — while the task
// already sent upstream runs on — and leaves the ledger audit clean; re-enabling lets the key and the
// user in again. Each is audited with its reason.
func TestAdminDisableAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// One upstream slot, held for a minute by the first task: the second waits for it.
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1", "SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1", "SIM_DURATION": "1m"})
		adm := signInStaff(t, s, "boss@example.com", "admin")
		b := signUpVerified(t, s, "shop@example.com")
		addFunds(t, b, "10")
		key := createKey(t, b, "prod")
		cust := admUser(t, s, "shop@example.com")
		base := "/support/accounts/" + strconv.FormatInt(cust.AccountID, 10)

		running := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "sent upstream"})["id"].(string)
		testkit.Eventually(t, 20*time.Second, "the first task gets the upstream slot", func() bool {
			return testkit.Task(t, s.DB, running).CredentialID != nil
		})
		waiting := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-720p", "prompt": "waits for the slot"})["id"].(string)
		time.Sleep(200 * time.Millisecond) // a worker pass or two: the task must still be waiting
		if w := testkit.Task(t, s.DB, waiting); w.CredentialID != nil || w.Status != "queued" {
			t.Fatalf("the second task did not wait: %+v", w)
		}

		admForm(adm.browser, base+"/disable", url.Values{"reason": {""}}).admStatus(t, "disable without a reason", 422).contains(t, "Give a reason")
		p := admForm(adm.browser, base+"/disable", url.Values{"reason": {"stolen card used to top up"}})
		p.admStatus(t, "disable review", 200).contains(t, "Disable account "+strconv.FormatInt(cust.AccountID, 10)+" (shop@example.com)?",
			"1 API keys are refused", "1 console sessions end", "1 videos waiting for generation fail", "$1.20 of reservations is released",
			"1 videos already sent for generation finish", "stolen card used to top up")
		checkPage(t, "disable confirmation", p)
		if r := s.Do(t, "GET", "/v1/models", key, nil); r.Status != 200 || admAccount(t, s, cust.AccountID).DisabledAt != nil {
			t.Fatal("the review disabled the account")
		}
		if d := admConfirm(t, adm.browser, p, nil).admStatus(t, "disable confirmed", 303); d.location() != base+"?notice=account-disabled" {
			t.Fatalf("after the disable: %q", d.location())
		}

		// At once on this instance, though the key was cached a moment ago.
		for _, r := range []*testkit.Resp{
			s.Do(t, "GET", "/v1/models", key, nil),
			s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "after"}),
			s.Do(t, "GET", "/v1/videos/"+running, key, nil),
		} {
			if r.Status != 401 || r.ErrorCode() != "account_disabled" || !strings.Contains(string(r.Body), "Contact support") {
				t.Fatalf("a disabled account's key: %d %s", r.Status, r.Body)
			}
		}
		if p := b.get("/console"); p.Status != 303 || !strings.HasPrefix(p.location(), "/signin") {
			t.Fatalf("the customer's session after the disable: %d %q", p.Status, p.location())
		}
		in := newBrowser(t, s)
		in.post("/signin", "/signin", url.Values{"email": {"shop@example.com"}, "password": {"paper-boats-float-42"}}).
			admStatus(t, "sign-in to a disabled account", 403).contains(t, "This account is disabled", "Contact support")

		w := testkit.Task(t, s.DB, waiting)
		if w.Status != "failed" || w.BillingState != "released" || w.ErrorCode == nil || *w.ErrorCode != "account_disabled" {
			t.Fatalf("the waiting task: %s %s %v", w.Status, w.BillingState, w.ErrorCode)
		}
		if k := testkit.Kinds(testkit.Entries(t, s.DB, waiting)); strings.Join(k, ",") != "reserve,release" {
			t.Fatalf("the waiting task's entries: %v", k)
		}
		if r := testkit.Task(t, s.DB, running); r.Status == "failed" || r.BillingState != "reserved" {
			t.Fatalf("the task already sent upstream was touched: %s %s", r.Status, r.BillingState)
		}
		a := admAccount(t, s, cust.AccountID)
		if a.ReservedMicros != 200_000 || a.AvailableMicros != 9_800_000 || a.WaitingTasks != 0 || a.DisabledReason != "stolen card used to top up" {
			t.Fatalf("the account after the disable: %+v", a)
		}
		testkit.CheckLedger(t, s.DB)
		rows := admAudit(t, s, "account.disable")
		if len(rows) != 1 || rows[0].Reason != "stolen card used to top up" || rows[0].IP != "127.0.0.1" || rows[0].Actor != "boss@example.com" ||
			!strings.Contains(rows[0].Detail, "1 keys refused, 1 sessions ended, 1 waiting tasks failed and $1.20 released, 1 tasks already sent upstream left to finish") {
			t.Fatalf("audit of the disable: %+v", rows)
		}
		admForm(adm.browser, base+"/disable", url.Values{"reason": {"again"}, "confirm": {"yes"}}).admStatus(t, "a second disable", 409)

		// Re-enabled: the key and the user are let in again at once.
		admForm(adm.browser, base+"/enable", url.Values{"reason": {""}}).admStatus(t, "enable without a reason", 422)
		if d := admForm(adm.browser, base+"/enable", url.Values{"reason": {"the bank cleared it"}}).admStatus(t, "enable", 303); d.location() != base+"?notice=account-enabled" {
			t.Fatalf("after the enable: %q", d.location())
		}
		if r := s.Do(t, "GET", "/v1/models", key, nil); r.Status != 200 {
			t.Fatalf("the key after re-enabling: %d %s", r.Status, r.Body)
		}
		in.post("/signin", "/signin", url.Values{"email": {"shop@example.com"}, "password": {"paper-boats-float-42"}}).admStatus(t, "sign-in once re-enabled", 303)
		if rows := admAudit(t, s, "account.enable"); len(rows) != 1 || rows[0].Reason != "the bank cleared it" || !strings.Contains(rows[0].Detail, "stolen card") {
			t.Fatalf("audit of the enable: %+v", rows)
		}
		admForm(adm.browser, base+"/enable", url.Values{"reason": {"again"}}).admStatus(t, "enabling an enabled account", 409)

		// A staff member's account is not disabled: that would lock them out.
		own := "/support/accounts/" + strconv.FormatInt(admUser(t, s, "boss@example.com").AccountID, 10)
		admForm(adm.browser, own+"/disable", url.Values{"reason": {"oops"}}).admStatus(t, "disabling a staff account", 422).contains(t, "staff users")
		testkit.CheckLedger(t, s.DB)
	})
}

// TestAdminPriceChangeOnEveryInstance: a price an admin changes on one instance shows at once on the
// other's /v1/models and /pricing and is what the other charges a new task; a task created before keeps
// its price. The change is audited (old → new) and names who made it; bad prices, unknown models and a
// change made meanwhile by someone else are refused.
func TestAdminPriceChangeOnEveryInstance(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		one := testkit.Start(t, dbURL, map[string]string{"DATA_DIR": dir, "WORKERS": "false"})
		two := testkit.Start(t, dbURL, map[string]string{"DATA_DIR": dir, "WORKERS": "false"})
		adm := signInStaff(t, one, "boss@example.com", "admin")
		cust := one.NewAccount(t, "10")
		const model = "videogen-2.0-mini-480p"
		before := two.CreateVideo(t, cust.Key, map[string]any{"model": model, "prompt": "before"})["id"].(string)
		priceOn := func(s *testkit.Server) string {
			for _, m := range s.Do(t, "GET", "/v1/models", cust.Key, nil).JSON(t)["data"].([]any) {
				if m := m.(map[string]any); m["id"] == model {
					return m["price_per_second"].(string)
				}
			}
			t.Fatal("no such model listed")
			return ""
		}
		if priceOn(two) != "0.050000" {
			t.Fatal("the seeded price is not listed")
		}
		newBrowser(t, two).get("/pricing").contains(t, "$0.05")

		page := adm.get("/support/prices").admStatus(t, "the price page", 200)
		page.contains(t, model, "0.050000", "default price")
		checkPage(t, "/support/prices", page)
		form := url.Values{"price_" + model: {"0.09"}, "was_" + model: {"50000"}, "reason": {"the mini upstream costs more"}}
		p := admForm(adm.browser, "/support/prices", form).admStatus(t, "price review", 200)
		p.contains(t, "Change 1 prices?", model, "$0.05 → $0.09 per second", "the mini upstream costs more", "Videos already created keep")
		checkPage(t, "price confirmation", p)
		if priceOn(two) != "0.050000" {
			t.Fatal("the review changed the price")
		}
		if d := admConfirm(t, adm.browser, p, nil).admStatus(t, "price confirmed", 303); d.location() != "/support/prices?notice=prices-saved" {
			t.Fatalf("after the change: %q", d.location())
		}

		// At once on the other instance: the list, the pricing page and the price of a new task.
		if got := priceOn(two); got != "0.090000" {
			t.Fatalf("the other instance lists %s after the change", got)
		}
		newBrowser(t, two).get("/pricing").contains(t, "$0.09")
		after := two.CreateVideo(t, cust.Key, map[string]any{"model": model, "prompt": "after"})
		if b := after["billing"].(map[string]any); b["amount"] != "0.360000" {
			t.Fatalf("a new task on the other instance: %v", b)
		}
		if old := testkit.Task(t, one.DB, before); old.PriceMicros != 50_000 || old.AmountMicros != 200_000 {
			t.Fatalf("the task created before the change: price %d amount %d", old.PriceMicros, old.AmountMicros)
		}
		var stored models.Price
		one.DB.R.Take(&stored, "model = ?", model)
		if stored.MicrosPerSecond != 90_000 || stored.UpdatedBy != "boss@example.com" {
			t.Fatalf("stored price %+v", stored)
		}
		rows := admAudit(t, one, "price.set")
		if len(rows) != 1 || rows[0].TargetType != "price" || rows[0].TargetID != model || rows[0].Detail != "$0.05 → $0.09 per second" ||
			rows[0].Reason != "the mini upstream costs more" || rows[0].IP != "127.0.0.1" || rows[0].Actor != "boss@example.com" {
			t.Fatalf("audit of the price: %+v", rows)
		}

		// The same confirmation again is stale: the price is no longer what it was based on.
		admConfirm(t, adm.browser, p, nil).admStatus(t, "a stale confirmation", 409).contains(t, "Another admin changed a price")

		for _, tc := range []struct {
			form url.Values
			want string
		}{
			{url.Values{"price_" + model: {"0"}}, "more than zero"},
			{url.Values{"price_" + model: {"-1"}}, "more than zero"},
			{url.Values{"price_" + model: {"0.0000001"}}, "at most six decimals"},
			{url.Values{"price_" + model: {"cheap"}}, "at most six decimals"},
			{url.Values{"price_" + model: {"1000.01"}}, "over $1000.00"},
			{url.Values{"price_" + model: {""}}, "Enter a price"},
			{url.Values{"price_videogen-9": {"0.10"}}, "There is no model"},
			{url.Values{"price_" + model: {"0.09"}}, "No price was changed"},
			{url.Values{"price_" + model: {"0.08"}, "reason": {""}}, "Give a reason"},
		} {
			f := url.Values{"reason": {"why not"}, "confirm": {"yes"}}
			for k, v := range tc.form {
				f[k] = v
			}
			admForm(adm.browser, "/support/prices", f).admStatus(t, fmt.Sprint(tc.form), 422).contains(t, tc.want)
		}
		if got := priceOn(one); got != "0.090000" || len(admAudit(t, one, "price.set")) != 1 {
			t.Fatalf("refused price forms changed the price: %s", got)
		}
	})
}

// TestAdminRoles: an admin grants and removes staff roles, effective from the user's next page; the
// last admin cannot be demoted (by themselves either), and two admins demoting each other at once leave
// one (internal/staff/admin's TestLastAdminUnderConcurrency repeats that race many times). Each change is
// audited.
func TestAdminRoles(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		adm := signInStaff(t, s, "boss@example.com", "admin")
		bob := signUpVerified(t, s, "bob@example.com")
		bobUser := admUser(t, s, "bob@example.com")
		rolePath := func(u models.User) string { return "/support/users/" + strconv.FormatInt(u.ID, 10) + "/role" }
		want := "/support/accounts/" + strconv.FormatInt(bobUser.AccountID, 10) + "?notice=role-changed"

		if bob.get("/support").Status != 404 {
			t.Fatal("a member reaches the staff pages")
		}
		if d := admForm(adm.browser, rolePath(bobUser), url.Values{"role": {"support"}, "reason": {"joins the support team"}}).admStatus(t, "grant support", 303); d.location() != want {
			t.Fatalf("after granting: %q", d.location())
		}
		// From bob's next page on, without signing in again: the staff pages ask for his second factor.
		if p := bob.get("/support"); p.Status != 303 || !strings.HasPrefix(p.location(), "/support/2fa") {
			t.Fatalf("the new support member's next staff page: %d %q", p.Status, p.location())
		}
		admForm(adm.browser, rolePath(bobUser), url.Values{"role": {"member"}}).admStatus(t, "remove the role", 303)
		if bob.get("/support").Status != 404 || admUser(t, s, "bob@example.com").Role != "member" {
			t.Fatal("a removed role still opens the staff pages")
		}
		admForm(adm.browser, rolePath(bobUser), url.Values{"role": {"root"}}).admStatus(t, "an unknown role", 422).contains(t, "member, support or admin")
		admForm(adm.browser, "/support/users/999999/role", url.Values{"role": {"admin"}}).admStatus(t, "an unknown user", 404)

		rows := admAudit(t, s, "role.set")
		if len(rows) != 2 || rows[0].Detail != "bob@example.com: member → support" || rows[0].Reason != "joins the support team" ||
			rows[0].TargetType != "user" || rows[0].TargetID != strconv.FormatInt(bobUser.ID, 10) || rows[0].IP != "127.0.0.1" ||
			rows[1].Detail != "bob@example.com: support → member" {
			t.Fatalf("audit of the roles: %+v", rows)
		}

		// The only admin cannot step down.
		boss := admUser(t, s, "boss@example.com")
		admForm(adm.browser, rolePath(boss), url.Values{"role": {"support"}}).admStatus(t, "the last admin stepping down", 409).contains(t, "only admin")
		if admUser(t, s, "boss@example.com").Role != "admin" || len(admAudit(t, s, "role.set")) != 2 {
			t.Fatal("the last admin was demoted")
		}

		// Two admins demoting each other at once: one wins, one admin is left.
		other := signInStaff(t, s, "deputy@example.com", "admin")
		deputy := admUser(t, s, "deputy@example.com")
		// Each posts with the CSRF token its console page gave before either demotion (an admin demoted
		// first may be between pages), and the two posts race.
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i, pair := range []struct {
			b      *browser
			target models.User
		}{{adm.browser, deputy}, {other.browser, boss}} {
			form := url.Values{"role": {"member"}, "_csrf": {csrfOf(t, pair.b, "/console")}}
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = pair.b.postRaw(rolePath(pair.target), form).Status
			}()
		}
		wg.Wait()
		var admins int64
		s.DB.R.Model(&models.User{}).Where("role = ?", "admin").Count(&admins)
		slices.Sort(statuses)
		// The loser is refused as the last admin (409), or, when the winner committed before its request
		// was let in, as no admin at all (404).
		if admins != 1 || statuses[0] != 303 || (statuses[1] != 404 && statuses[1] != 409) {
			t.Fatalf("two admins demoting each other: statuses %v, %d admins left", statuses, admins)
		}

		// An admin may step down while another admin remains; their staff pages go at once.
		last := adm
		if admUser(t, s, "boss@example.com").Role != "admin" {
			last = other
		}
		admForm(last.browser, rolePath(bobUser), url.Values{"role": {"admin"}}).admStatus(t, "make bob admin", 303)
		me := admUser(t, s, last.Email)
		if d := admForm(last.browser, rolePath(me), url.Values{"role": {"member"}}).admStatus(t, "stepping down", 303); d.location() != "/console" {
			t.Fatalf("after stepping down: %q", d.location())
		}
		if last.get("/support").Status != 404 {
			t.Fatal("a former admin still reaches the staff pages")
		}
	})
}

// TestRoleChangeAsksForTheSecondFactorAgain: a staff session that passed the second factor under one
// role does not carry it into the next. Demoted and promoted again, the old browser is asked for a code
// before any staff page; so is a staff member moved between support and admin.
func TestRoleChangeAsksForTheSecondFactorAgain(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		adm := signInStaff(t, s, "chief@example.com", "admin")
		sup := signInStaff(t, s, "agent@example.com", "support")
		agent := admUser(t, s, "agent@example.com")
		rolePath := "/support/users/" + strconv.FormatInt(agent.ID, 10) + "/role"
		if p := sup.get("/support"); p.Status != 200 {
			t.Fatalf("the support member's own staff page before any change: %d", p.Status)
		}
		asksForCode := func(what string) {
			t.Helper()
			if p := sup.get("/support"); p.Status != 303 || !strings.HasPrefix(p.location(), "/support/2fa?") {
				t.Fatalf("%s: the old session opened /support: %d %q", what, p.Status, p.location())
			}
		}

		admForm(adm.browser, rolePath, url.Values{"role": {"member"}}).admStatus(t, "demote", 303)
		if sup.get("/support").Status != 404 {
			t.Fatal("a demoted member still reaches the staff pages")
		}
		admForm(adm.browser, rolePath, url.Values{"role": {"support"}}).admStatus(t, "promote again", 303)
		asksForCode("demoted, then promoted again")

		// A code passes the session again (a recovery code: the authenticator's step of now was spent at
		// enrolment), under the new role only.
		sup.submit("/support/2fa", "code", url.Values{"code": {sup.Recovery[0]}}).admStatus(t, "a fresh code", 303)
		if p := sup.get("/support"); p.Status != 200 {
			t.Fatalf("after a fresh code: %d", p.Status)
		}
		admForm(adm.browser, rolePath, url.Values{"role": {"admin"}}).admStatus(t, "support to admin", 303)
		asksForCode("support to admin")

		// The admin who made the changes kept their own pass: only the changed user's sessions forget it.
		if p := adm.get("/support"); p.Status != 200 {
			t.Fatalf("the acting admin's session: %d", p.Status)
		}
	})
}
