package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestBrowserSupport walks the staff side in a real browser: a support engineer signs in with a
// password and an authenticator code, pastes the request id of a customer's failed API call, lands on
// that call, opens its task and reads why the customer was not charged; an admin credits the account
// with a reason and the customer's wallet shows the entry; a member gets the 404 page on /support.
// Screenshots go to tmp/screenshots/TestBrowserSupport.
func TestBrowserSupport(t *testing.T) {
	const password = "paper-boats-float-42" // signUpVerified's
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"SIM_DURATION": "100ms"})

	// The customer, and their failed video: the API answer's X-Request-Id is what they send support.
	cust := signUpVerified(t, s, "customer@example.com")
	var owner models.User
	s.DB.R.Where("email = ?", "customer@example.com").Take(&owner)
	if err := creditUSD(s, owner.AccountID, "10"); err != nil {
		t.Fatal(err)
	}
	m := secretRE.FindStringSubmatch(cust.submit("/console/keys", "name", map[string][]string{"name": {"app"}}).Body)
	if m == nil {
		t.Fatal("no key created")
	}
	key := m[1]
	create := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a storm [sim:fail]"})
	rid := create.Header.Get("X-Request-Id")
	id := create.JSON(t)["id"].(string)
	s.WaitStatus(t, key, id, 20*time.Second, "failed")
	waitCall(t, s, rid)

	// Staff enrolled their authenticators earlier (through the same pages, over HTTP).
	sup := signInStaff(t, s, "helpdesk@example.com", models.RoleSupport)
	adm := signInStaff(t, s, "boss@example.com", models.RoleAdmin)

	shots, _ := filepath.Abs(filepath.Join("..", "tmp", "screenshots", t.Name()))
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)
	n := 0
	b := chromium(t)
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return v
	}
	where := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		p, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	submit := func(what, form string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(form+` button[type="submit"]`))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// follow clicks a link and waits for the page it leads to (a bare click returns before the navigation).
	follow := func(what, link string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(link))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	photo := func(name string) {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%02d-%s.png", n, name)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	signIn := func(email string) {
		t.Helper()
		run("sign out", chromedp.Navigate(s.URL+"/console"))
		if where() != "/signin" {
			submit("sign out", `header .nav-wide form[action="/signout"]`)
		}
		run("open the sign-in page", chromedp.Navigate(s.URL+"/signin?next=/support"),
			chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), password))
		submit("sign in as "+email, "main form")
	}
	// secondFactor types the authenticator's code. Enrolment spent this 30-second step's code, and a code
	// is good once, so the authenticator's next code is typed (the server accepts one step of skew).
	secondFactor := func(st *staff) {
		t.Helper()
		if p := where(); p != "/support/2fa" {
			t.Fatalf("a staff sign-in went to %s, not to the second factor", p)
		}
		photo("second-factor-" + strings.Split(st.Email, "@")[0])
		code, err := totp.GenerateCode(st.Secret, time.Now().Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		run("type the code", chromedp.SendKeys(chromedp.ID("code"), code))
		submit("send the code", "main form")
		if p := where(); p != "/support" {
			t.Fatalf("after the second factor the browser is at %s", p)
		}
	}

	// Support: sign in, second factor, paste the request id.
	signIn(sup.Email)
	secondFactor(sup)
	photo("overview")
	run("paste the request id", chromedp.SendKeys(chromedp.ID("q"), rid))
	submit("search", "form.search")
	if p := where(); p != "/support/calls/"+rid {
		t.Fatalf("the request id led to %s", p)
	}
	if h := text("h1"); !strings.Contains(h, rid) {
		t.Fatalf("call page heading %q", h)
	}
	photo("call")
	follow("open the task", `a[href$="/tasks/`+id+`"]`)
	if p := where(); !strings.HasSuffix(p, "/tasks/"+id) {
		t.Fatalf("the task link led to %s", p)
	}
	summary := text(".staff-only .summary")
	if !strings.HasPrefix(summary, "Not charged: the task failed") || !strings.Contains(summary, "released") {
		t.Fatalf("what happened: %q", summary)
	}
	photo("task")

	// An admin: credit the account $5 with a reason, confirmed on the page that restates it.
	signIn(adm.Email)
	secondFactor(adm)
	account := fmt.Sprintf("/support/accounts/%d", owner.AccountID)
	run("open the account", chromedp.Navigate(s.URL+account))
	photo("account")
	run("fill in the credit", chromedp.SendKeys(chromedp.ID("adjust-amount"), "5"),
		chromedp.SendKeys(chromedp.ID("adjust-reason"), "Goodwill for the failed storm video"))
	submit("review the credit", `form[action="`+account+`/balance"]`)
	if h := text("h1"); !strings.HasPrefix(h, fmt.Sprintf("Credit $5.00 to account %d", owner.AccountID)) {
		t.Fatalf("the confirmation page says %q", h)
	}
	if m := text("main"); !strings.Contains(m, "Goodwill for the failed storm video") || !strings.Contains(m, "$10.00 now, $15.00 after") {
		t.Fatalf("the confirmation does not state the credit: %q", m)
	}
	photo("confirm-credit")
	submit("confirm the credit", `main form[action="`+account+`/balance"]`)
	if p, notice := where(), text(".notice.ok"); p != account || !strings.Contains(notice, "The balance was adjusted") {
		t.Fatalf("after the credit the browser is at %s, saying %q", p, notice)
	}
	photo("credited")

	// The customer: their wallet shows the credit with its reason; /support is the 404 page.
	signIn("customer@example.com")
	run("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"))
	if w := text("main"); !strings.Contains(w, "Goodwill for the failed storm video") || !strings.Contains(w, "$15.00") {
		t.Fatalf("the wallet does not show the admin's credit: %q", w)
	}
	photo("customer-wallet")
	run("try the staff pages", chromedp.Navigate(s.URL+"/support"))
	if h := text("h1"); h != "Page not found" {
		t.Fatalf("a member on /support sees %q", h)
	}
	photo("member-404")
}
