package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
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
// Every staff page, listed in staffPages, is checked at a laptop's and a phone's width as the console's
// are (measureFit): its tables fit, its money, status and action cells are on screen. Screenshots go to
// tmp/screenshots/TestBrowserSupport.
func TestBrowserSupport(t *testing.T) {
	const password = "paper-boats-float-42" // signUpVerified's
	// The customer's webhook endpoint is reached as https://hooks.example.com.
	s, _ := startHooks(t, testkit.SQLiteURL(t), map[string]string{"SIM_DURATION": "100ms"}, &hookReceiver{})

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
	// A video that completes ($1.80 charged: $8.20 left), a webhook endpoint with a delivered test event, two card payments that
	// moved no money: rows for every table of the account's staff pages.
	done := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-fast-1080p", "prompt": "a lighthouse at dusk, waves breaking on the rocks"})["id"].(string)
	s.WaitStatus(t, key, done, 20*time.Second, "completed")
	cust.submit("/console/webhooks", "url", url.Values{"url": {"https://hooks.example.com/videogen/support-test"}, "events": {"video.completed", "video.failed"}})
	ep := endpointLinkRE.FindStringSubmatch(cust.get("/console/webhooks").Body)
	if ep == nil {
		t.Fatal("no webhook endpoint added")
	}
	if p := cust.submit("/console/webhooks/"+ep[1], "type", url.Values{"type": {"video.failed"}}); p.Status != 303 {
		t.Fatalf("send a test event: %d", p.Status)
	}
	testkit.Eventually(t, 20*time.Second, "the test event's attempt", func() bool {
		var n int64
		s.DB.R.Model(&models.WebhookAttempt{}).Count(&n)
		return n > 0
	})
	seedDeclinedPayments(t, s, owner.AccountID)

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
	eval := func(what, js string, into any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(b, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(v, into); err != nil {
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
	// both checks the page at a laptop's and a phone's width (measureFit, and extra at each width) and
	// photographs it at each; it leaves the browser at the laptop's width.
	both := func(name string, want []string, extra ...func(width int)) {
		t.Helper()
		for _, w := range []struct{ width, height int }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
			run("resize to "+itoa(w.width), chromedp.EmulateViewport(int64(w.width), int64(w.height)))
			checkFit(t, b, fmt.Sprintf("%s at %d px", name, w.width), want)
			for _, f := range extra {
				f(w.width)
			}
			photo(fmt.Sprintf("%s-%d", name, w.width))
		}
		run("resize back", chromedp.EmulateViewport(desktopWidth, desktopHeight))
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
		chromedp.SendKeys(chromedp.ID("adjust-reason"), "Goodwill for the failed storm video"),
		chromedp.SendKeys(chromedp.ID("adjust-note"), "Credit for the storm video"))
	submit("review the credit", `form[action="`+account+`/balance"]`)
	if h := text("h1"); !strings.HasPrefix(h, fmt.Sprintf("Credit $5.00 to account %d", owner.AccountID)) {
		t.Fatalf("the confirmation page says %q", h)
	}
	if m := text("main"); !strings.Contains(m, "Goodwill for the failed storm video") || !strings.Contains(m, "$8.20 now, $13.20 after") {
		t.Fatalf("the confirmation does not state the credit: %q", m)
	}
	// The review states its headline once (as its heading), and the staff banner above it is not
	// squeezed: its words read as one line of text at a laptop's width, its links each on one line.
	both("confirm-credit", nil, func(width int) {
		var r struct {
			Headlines             int
			WhoseLines, LinkLines float64
		}
		eval("measure the review", `(() => {
			const h = document.querySelector("main h1").textContent.trim().replace(/\?$/, "");
			const lines = el => { const s = getComputedStyle(el); return el.getBoundingClientRect().height / (parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.5); };
			return {headlines: document.querySelector("main").innerText.split(h).length - 1,
				whoseLines: lines(document.querySelector(".staff-banner .whose")),
				linkLines: Math.max(...[...document.querySelectorAll(".staff-banner .subnav a")].map(lines))};
		})()`, &r)
		if r.Headlines != 1 || r.LinkLines > 1.5 || (width == desktopWidth && r.WhoseLines > 1.5) {
			t.Errorf("the credit review at %d px: its headline shown %d times (want once); the banner's text %.1f lines, its links up to %.1f lines", width, r.Headlines, r.WhoseLines, r.LinkLines)
		}
	})
	submit("confirm the credit", `main form[action="`+account+`/balance"]`)
	if p, notice := where(), text(".notice.ok"); p != account || !strings.Contains(notice, "The balance was adjusted") {
		t.Fatalf("after the credit the browser is at %s, saying %q", p, notice)
	}
	photo("credited")

	// Every staff page at both widths; a new staff page is one line here.
	ledgerEntry := func() string {
		var e models.LedgerEntry
		s.DB.R.Where("account_id = ? AND kind = ?", owner.AccountID, models.KindAdjustment).Take(&e)
		return e.Reason
	}()
	staffPages := []fitPage{
		{"overview", "/support", []string{"status"}},
		{"search-by-domain", "/support/search?q=EXAMPLE.com", []string{"action"}},
		{"account-page", account, []string{"money", "status"}},
		{"account-tasks", account + "/tasks", []string{"money", "status"}},
		{"account-task", account + "/tasks/" + done, []string{"money"}},
		{"account-calls", account + "/calls", []string{"money", "status"}},
		{"account-ledger", account + "/ledger", []string{"money"}},
		{"account-webhooks", account + "/webhooks", []string{"status"}},
		{"account-webhook", account + "/webhooks/" + ep[1], []string{"status"}},
		{"call-page", "/support/calls/" + rid, []string{"money"}},
		{"audit-log", "/support/audit", []string{"action"}},
		{"prices", "/support/prices", []string{"money", "action"}},
		{"two-step", "/support/2fa", nil},
		{"own-console", "/console", nil}, // a staff member's header has one link more: Support
	}
	for _, p := range staffPages {
		run("open "+p.path, chromedp.Navigate(s.URL+p.path))
		if h := text("h1"); h == "Page not found" {
			t.Fatalf("%s: %q", p.path, h)
		}
		both(p.name, p.want)
	}
	// On an account's pages the staff navigation marks Search (where accounts are found), not Overview,
	// and the banner marks the page of the account shown.
	for path, want := range map[string][2]string{account: {"Search", "Account"}, account + "/ledger": {"Search", "Ledger"},
		account + "/calls": {"Search", "Call log"}, "/support": {"Overview", ""}, "/support/audit": {"Audit log", ""}} {
		run("open "+path, chromedp.Navigate(s.URL+path))
		var got [2]string
		eval("read the current links", `[document.querySelector("header .nav-wide a[aria-current=page]")?.textContent.trim() ?? "",
			document.querySelector(".staff-banner a[aria-current=page]")?.textContent.trim() ?? ""]`, &got)
		if got != want {
			t.Errorf("%s marks %q in the navigation and %q in the banner, want %q", path, got[0], got[1], want)
		}
	}
	// The audit log's short reason reads on one or two lines at a laptop's width, not five.
	run("open the audit log", chromedp.Navigate(s.URL+"/support/audit?action=balance."))
	var reasonLines float64
	eval("measure the reason", `(() => { const td = [...document.querySelectorAll("main td.reason")].find(td => td.textContent.trim() !== "");
		const r = document.createRange(); r.selectNodeContents(td); // the text's lines, not the row's height
		return r.getBoundingClientRect().height / parseFloat(getComputedStyle(td).lineHeight); })()`, &reasonLines)
	if ledgerEntry == "" || reasonLines > 2.2 {
		t.Errorf("the audit log wraps the %d-character reason %q over %.1f lines", len(ledgerEntry), ledgerEntry, reasonLines)
	}

	// The customer: their wallet shows the credit with the note written for them, not the staff's
	// reason; /support is the 404 page.
	signIn("customer@example.com")
	run("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"))
	if w := text("main"); !strings.Contains(w, "Credit for the storm video") || strings.Contains(w, "Goodwill for the failed storm video") || !strings.Contains(w, "$13.20") {
		t.Fatalf("the wallet does not show the admin's credit: %q", w)
	}
	photo("customer-wallet")
	run("try the staff pages", chromedp.Navigate(s.URL+"/support"))
	if h := text("h1"); h != "Page not found" {
		t.Fatalf("a member on /support sees %q", h)
	}
	photo("member-404")
}
