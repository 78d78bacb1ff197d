package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
	"videogen/models"
	"videogen/views"
	"videogen/views/customer"
)

// chromium starts Debian's headless Chromium for one test (make test and .ci/run install it).
func chromium(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required for the browser tests: `make test` installs it (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first action starts the browser; it must not run under a timeout, which would stop the browser.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// pageLayout is what the browser test measures on a page at one width.
type pageLayout struct {
	ScrollWidth, ClientWidth, InnerWidth int
	HeaderHeight                         float64
	Header                               []string // the header's visible links and buttons, in order
	RowSpread                            float64  // how far apart their vertical centres are
	Overflowing                          []string // elements sticking out to the right (for the failure message)
	Tables, WrappedTables                int
}

// measureLayout reads a pageLayout; elements inside a .table-wrap may be wider than the page, since that
// box scrolls on its own.
const measureLayout = `(() => {
	const shown = el => { const r = el.getBoundingClientRect(); return el.checkVisibility({visibilityProperty: true}) && r.width > 0 && r.height > 0; };
	const doc = document.documentElement, header = document.querySelector("header.top");
	const items = [...header.querySelectorAll("a, button, summary")].filter(shown);
	const mids = items.map(el => { const r = el.getBoundingClientRect(); return r.top + r.height / 2; });
	const out = [];
	for (const el of document.body.querySelectorAll("*")) {
		if (el.getBoundingClientRect().right > doc.clientWidth + 0.5 && !el.closest(".table-wrap")) {
			out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + " " + (el.textContent || "").trim().slice(0, 50));
		}
	}
	return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, innerWidth: innerWidth,
		headerHeight: header.getBoundingClientRect().height, header: items.map(el => el.textContent.trim()),
		rowSpread: Math.max(...mids) - Math.min(...mids), overflowing: out.slice(0, 8),
		tables: document.querySelectorAll("main table").length, wrappedTables: document.querySelectorAll("main .table-wrap > table").length};
})()`

// menuLinks lists the links and buttons shown in the opened narrow-screen menu, and any that stick out
// of the screen.
const menuLinks = `(() => {
	const doc = document.documentElement;
	const els = [...document.querySelectorAll("header .nav-panel a, header .nav-panel button")]
		.filter(el => { const r = el.getBoundingClientRect(); return el.checkVisibility({visibilityProperty: true}) && r.width > 0 && r.height > 0; });
	return {shown: els.map(el => el.textContent.trim()),
		outside: els.filter(el => { const r = el.getBoundingClientRect(); return r.left < 0 || r.right > doc.clientWidth + 0.5; }).map(el => el.textContent.trim()),
		scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth};
})()`

type menuState struct {
	Shown, Outside           []string
	ScrollWidth, ClientWidth int
}

// The widths every page is checked and photographed at: a laptop and a phone (iPhone 12 to 15).
const (
	desktopWidth, desktopHeight = 1280, 900
	phoneWidth, phoneHeight     = 390, 844
)

// TestBrowserJourney walks a new customer through the console in a real browser: sign up, verify from the
// e-mail, add test funds, create a key, use it over HTTP, watch the video complete, play and download it,
// find the call in the call log, then visit every other page and sign out through the phone menu.
//
// Every page is checked at a laptop's width and a phone's: the header is one row (at the laptop's width
// two for a signed-in member whose whole address does not fit beside the links; at the phone's width,
// the logo and a menu that opens and shows every link), no page scrolls sideways, and every table fits
// its box without scrolling — columns combined at the laptop's width, a card per row at the phone's —
// with each money, status and action cell on screen (measureFit). Then every console page, listed in
// consolePages, is checked so. A screenshot of each page at each width goes to
// tmp/screenshots/TestBrowserJourney.
func TestBrowserJourney(t *testing.T) {
	// A long address: the header must cut it short, not wrap.
	const email, password = "journey.with.a.rather.long.address@example-videos.com", "paper-boats-float-42"
	// Webhook deliveries go to a receiver the server reaches as https://hooks.example.com.
	s, _ := startHooks(t, testkit.SQLiteURL(t), map[string]string{"TEST_TOPUPS": "1", "SIM_DURATION": "1s"}, &hookReceiver{})
	browser := chromium(t)
	shots, _ := filepath.Abs(filepath.Join("..", "tmp", "screenshots", t.Name()))
	if err := os.RemoveAll(shots); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots: %s", shots)
	n := 0
	ctxFor := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, 30*time.Second) }
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(what string, sel chromedp.CSS) string {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Text(sel))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	eval := func(what, js string, into any) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := json.Unmarshal(v, into); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	submit := func(what string) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`main form button[type="submit"]`))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	photo := func(name string, full bool) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		shot := chromedp.FullScreenshot(100)
		if !full { // an open menu overlays the top of the page: the viewport shows it
			shot = chromedp.CaptureScreenshot()
		}
		buf, err := chromedp.Run(ctx, shot)
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%02d-%s.png", n, name)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// look checks the page on screen at both widths and photographs it; extra runs more checks at each
	// width. It leaves the browser at the laptop's width.
	look := func(name string, extra ...func(width int)) {
		t.Helper()
		n++
		signedIn := false
		for _, w := range []struct{ width, height int }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
			do("resize to "+itoa(w.width), chromedp.EmulateViewport(int64(w.width), int64(w.height)))
			var l pageLayout
			eval("measure "+name, measureLayout, &l)
			where := fmt.Sprintf("%s at %d px", name, w.width)
			if l.ScrollWidth > l.ClientWidth || l.ClientWidth > w.width {
				t.Errorf("%s scrolls sideways: %d px of content in %d px; sticking out: %q", where, l.ScrollWidth, l.ClientWidth, l.Overflowing)
			}
			if l.Tables != l.WrappedTables {
				t.Errorf("%s: %d of %d tables are not in a .table-wrap box", where, l.Tables-l.WrappedTables, l.Tables)
			}
			// One row; at desktop widths, two when the member's address (shown whole, never cut) and Sign
			// out do not fit beside the links — which this journey's long address never does.
			if rows := 1 + btoi(w.width == desktopWidth && signedInHeader(l.Header)); (rows == 1 && l.RowSpread > 2) || l.HeaderHeight > float64(72*rows) {
				t.Errorf("%s: the header is not %d row(s) (%.0f px high, centres %.0f px apart): %q", where, rows, l.HeaderHeight, l.RowSpread, l.Header)
			}
			if w.width == desktopWidth {
				signedIn = slices.Contains(l.Header, "Sign out")
				want := []string{"videogen", "Pricing", "API docs", "Sign in", "Create account"}
				if signedIn {
					want = []string{"videogen", "Dashboard", "Tasks", "Call log", "API keys", "Webhooks", "Wallet", "Usage", "Statements", "Members", "Pricing", "example-videos.com " + email, "Sign out"}
				}
				if !slices.Equal(l.Header, want) {
					t.Errorf("%s: the header shows %q, want %q", where, l.Header, want)
				}
			} else if !slices.Equal(l.Header, []string{"videogen", "Menu"}) {
				t.Errorf("%s: the header shows %q, want the logo and the menu only", where, l.Header)
			}
			checkFit(t, browser, where, nil)
			for _, f := range extra {
				f(w.width)
			}
			photo(fmt.Sprintf("%s-%d", name, w.width), true)
			if w.width == phoneWidth {
				// The menu opens without JavaScript's help (a <details>), and shows every link on screen.
				do("open the menu on "+name, chromedp.Click(chromedp.CSS("header summary")))
				var m menuState
				eval("read the menu on "+name, menuLinks, &m)
				want := []string{"Pricing", "API docs", "Sign in", "Create account"}
				if signedIn {
					want = []string{"Dashboard", "Tasks", "Call log", "API keys", "Webhooks", "Wallet", "Usage", "Statements", "Members", "Pricing", "example-videos.com " + email, "Sign out"}
				}
				if !slices.Equal(m.Shown, want) || len(m.Outside) > 0 || m.ScrollWidth > m.ClientWidth {
					t.Errorf("%s: the open menu shows %q (want %q); off screen: %q; %d px of content in %d", where, m.Shown, want, m.Outside, m.ScrollWidth, m.ClientWidth)
				}
				photo(fmt.Sprintf("%s-%d-menu", name, w.width), false)
				do("close the menu on "+name, chromedp.Click(chromedp.CSS("header summary")))
			}
		}
		do("resize back", chromedp.EmulateViewport(desktopWidth, desktopHeight))
	}
	heading := func(want string) {
		t.Helper()
		if h1 := text("read the heading", "h1"); !strings.Contains(h1, want) {
			t.Fatalf("heading %q, want %q", h1, want)
		}
	}
	path := func() string {
		t.Helper()
		var p string
		eval("read the address bar", `location.pathname + location.search`, &p)
		return p
	}
	do("open the home page", chromedp.Navigate(s.URL+"/"))
	heading("Generate videos")
	look("home")

	do("open the sign-up page", chromedp.Navigate(s.URL+"/signup"))
	look("signup")
	do("fill in the sign-up form", chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("terms")))
	submit("sign up")
	heading("Check your inbox")
	look("check-inbox")

	link := mailedLink(t, s, email)
	do("open the verification link", chromedp.Navigate(s.URL+link))
	heading("Confirm your e-mail address")
	look("confirm")
	// Confirming from the browser that signed up signs the person in.
	submit("confirm the address")
	heading("Dashboard")
	if notice := text("read the notice", ".notice.ok"); notice != "Your e-mail address is confirmed. Welcome!" {
		t.Fatalf("after confirming: %q", notice)
	}
	// The curl command is a shell block of four lines joined by backslashes, each line whole on screen
	// (never broken inside the JSON): at a laptop's width it fits, on a phone its box scrolls. Its Copy
	// button copies it as shown.
	command := customer.FirstCurl(s.Cfg.PublicBaseURL)
	look("dashboard-new", func(width int) {
		var curl struct{ ScrollWidth, ClientWidth, ContentHeight, LineHeight float64 }
		eval("measure the curl line", `(() => { const p = document.getElementById("first-curl"), s = getComputedStyle(p);
			return {scrollWidth: p.scrollWidth, clientWidth: p.clientWidth, contentHeight: p.clientHeight - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom),
				lineHeight: parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.2}; })()`, &curl)
		if lines := curl.ContentHeight / curl.LineHeight; lines < 3.5 || lines > 4.5 {
			t.Errorf("at %d px the curl command shows as %.1f lines, want its 4 lines whole: %+v", width, lines, curl)
		}
		if width == desktopWidth && curl.ScrollWidth > curl.ClientWidth {
			t.Errorf("at %d px the curl command does not fit its box: %+v", width, curl)
		}
	})
	ctx, cancel := ctxFor()
	err := chromedp.FromContext(ctx).Browser.Call(ctx, "Browser.setPermission", map[string]any{
		"permission": map[string]string{"name": "clipboard-read"}, "setting": "granted", "origin": s.URL}, nil)
	cancel()
	if err != nil {
		t.Fatalf("allow the test to read the clipboard: %v", err)
	}
	do("copy the curl line", chromedp.Click(chromedp.CSS(`button[data-copy="first-curl"]`)))
	var copied string
	eval("read the clipboard", `new Promise(ok => { // app.js says "Copied" once the clipboard holds the text
		const b = document.querySelector('button[data-copy="first-curl"]');
		const check = () => b.textContent === "Copied" ? ok() : requestAnimationFrame(check);
		check();
	}).then(() => navigator.clipboard.readText())`, &copied)
	if copied != command {
		t.Fatalf("the Copy button copied %q, want the command %q", copied, command)
	}

	// A refused amount is shown again at the wallet's own address, beside its field, as typed.
	do("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"), chromedp.SendKeys(chromedp.ID("amount"), "ten"))
	submit("add a refused amount")
	if p, e := path(), text("read the error", "#amount-error"); p != "/console/wallet" || !strings.Contains(e, "Enter an amount") {
		t.Fatalf("a refused amount left the browser at %s with %q", p, e)
	}
	look("wallet-refused")
	do("correct the amount", chromedp.SetValue(chromedp.ID("amount"), "25"))
	submit("add test funds")
	if notice := text("read the notice", ".notice.ok"); !strings.Contains(notice, "Test funds were added") {
		t.Fatalf("after adding funds: %q", notice)
	}
	look("wallet")

	do("open the keys page", chromedp.Navigate(s.URL+"/console/keys"), chromedp.SendKeys(chromedp.ID("name"), "journey laptop"))
	submit("create a key")
	secret := text("read the new key", "#new-secret")
	if !strings.HasPrefix(secret, "vg_") {
		t.Fatalf("secret %q", secret)
	}
	look("key-created")

	// The key works over HTTP, from outside the browser. The prompt has a long unbroken word: it must
	// wrap on the task's page, not push it sideways.
	prompt := "a paper boat on a rainy street, seen from https://example.com/a-very-long-address-with-no-place-to-break-it-at-all"
	id := s.CreateVideo(t, secret, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": prompt})["id"].(string)

	var row string
	testkit.Eventually(t, 60*time.Second, "the task shows as completed on the tasks page", func() bool {
		do("open the tasks page", chromedp.Navigate(s.URL+"/console/tasks"))
		row = text("read the newest task", "tbody tr")
		return strings.Contains(row, id) && strings.Contains(row, "completed")
	}, func() string { return fmt.Sprintf("newest row %q", row) })
	look("tasks")

	// A video made in the browser lands on its own page, which follows it.
	do("open the new-video form", chromedp.Navigate(s.URL+"/console/tasks"), chromedp.Click(chromedp.CSS(`main a[href="/console/videos/new"]`)))
	look("new-video")
	do("write a prompt and make the video", chromedp.SendKeys(chromedp.ID("prompt"), "a kite over the dunes"), chromedp.Click(chromedp.CSS("[data-price-button]")))
	testkit.Eventually(t, 20*time.Second, "the new video's page", func() bool { return strings.HasPrefix(path(), "/console/tasks/video_") },
		func() string { return "at " + path() })
	look("new-video-made")

	do("open the task", chromedp.Navigate(s.URL+"/console/tasks/"+id))
	ctx, cancel = ctxFor()
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`new Promise((ok, fail) => {
		const v = document.querySelector("video");
		if (!v) return fail("no video element");
		const done = () => ok(v.videoWidth);
		if (v.readyState >= 1) return done();
		v.addEventListener("loadedmetadata", done);
		v.addEventListener("error", () => fail("the browser could not play the video"));
	})`, chromedp.EvalAwaitPromise))
	cancel()
	if err != nil || width != 864 {
		t.Fatalf("the browser played a video %d pixels wide (%v), want 864", width, err)
	}
	look("task")
	ctx, cancel = ctxFor()
	download, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("a[download]").href)
		.then(async r => r.status + "|" + r.headers.get("content-type") + "|" + (await r.arrayBuffer()).byteLength)`, chromedp.EvalAwaitPromise))
	cancel()
	if err != nil || !strings.HasPrefix(download, "200|video/mp4|") || strings.HasSuffix(download, "|0") {
		t.Fatalf("download in the browser: %q %v", download, err)
	}

	// The client reads its finished task eight times: with the create's calls, the call log has more than
	// a screen of rows, however few polls the machine's speed let WaitStatus make below.
	for range 8 {
		if r := s.Do(t, "GET", "/v1/videos/"+id, secret, nil); r.Status != 200 {
			t.Fatalf("read the task: %d", r.Status)
		}
	}

	// A video that fails: its row shows the amount released.
	failed := s.CreateVideo(t, secret, map[string]any{"model": "videogen-2.0-fast-1080p", "prompt": "a storm over the harbour [sim:fail]", "seconds": 8})["id"].(string)
	s.WaitStatus(t, secret, failed, 60*time.Second, "failed")

	do("open the call log", chromedp.Navigate(s.URL+"/console/calls"))
	if calls := text("read the call log", "tbody"); !strings.Contains(calls, "POST /v1/videos") || !strings.Contains(calls, views.ShortID(id)) {
		t.Fatalf("the call log does not show the create call: %q", calls)
	}
	look("calls")
	// Each call takes one or two lines at 1280 px (2.7 line-heights with the cell's padding), so that
	// about ten fit on a 1280×800 screen.
	var rows struct{ Rows, Fit, Tallest float64 }
	eval("measure the call log's rows", `(() => { const rs = [...document.querySelectorAll("table.calls tbody tr")];
		const line = parseFloat(getComputedStyle(document.querySelector("table.calls td")).lineHeight);
		return {Rows: rs.length, Fit: rs.filter(r => r.getBoundingClientRect().bottom <= innerHeight).length,
			Tallest: Math.max(...rs.map(r => r.getBoundingClientRect().height)) / line}; })()`, &rows)
	if rows.Rows < 10 || rows.Fit < 9 || rows.Tallest > 2.7 {
		t.Errorf("the call log at 1280×800: %v of %v rows on the first screen, the tallest %.1f lines", rows.Fit, rows.Rows, rows.Tallest)
	}
	var createCall models.CallLog
	s.DB.R.Where("task_id = ? AND method = ?", id, "POST").Take(&createCall)
	follow := fmt.Sprintf(`a[href="/console/calls/%s"]`, createCall.RequestID)
	ctx, cancel = ctxFor()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(follow))); err != nil {
		t.Fatalf("open the create's call: %v", err)
	}
	cancel()
	if h := text("read the call's heading", "h1"); !strings.Contains(h, createCall.RequestID) {
		t.Fatalf("the call page's heading: %q", h)
	}

	// The pages the journey has not shown yet, signed in.
	do("open the keys page", chromedp.Navigate(s.URL+"/console/keys"))
	ctx, cancel = ctxFor()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`a[href$="/revoke"]`))); err != nil { // waits for the page
		t.Fatalf("open the revoke page: %v", err)
	}
	cancel()
	heading("Revoke journey laptop?")
	look("revoke")
	do("open the account page", chromedp.Navigate(s.URL+"/console/account"),
		chromedp.SendKeys(chromedp.ID("current"), "not-my-password"), chromedp.SendKeys(chromedp.ID("password"), "new-kites-fly-high-7"))
	ctx, cancel = ctxFor()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`main form:has(input[name="form"][value="password"]) button[type="submit"]`))); err != nil {
		t.Fatalf("change the password: %v", err)
	}
	cancel()
	if p, e := path(), text("read the error", "#current-error"); p != "/console/account" || !strings.Contains(e, "not your current password") {
		t.Fatalf("a refused password change left the browser at %s with %q", p, e)
	}
	look("account")
	// An endpoint with a long address, and a test event sent to it: the deliveries table has a row and
	// its Resend button.
	do("open the webhooks page", chromedp.Navigate(s.URL+"/console/webhooks"))
	heading("Webhooks")
	look("webhooks-empty")
	do("add an endpoint", chromedp.SendKeys(chromedp.ID("url"), "https://hooks.example.com/videogen/journey/events-received-here-with-a-long-path"))
	submit("add the endpoint")
	heading("Endpoint")
	var endpoint string // the page showing the new secret is the POST's answer: its forms name the endpoint
	eval("read the endpoint's id", `document.querySelector('main form[action$="/test"]').getAttribute("action").split("/")[3]`, &endpoint)
	submit("send a test event") // the page's first form
	var deliveries string
	testkit.Eventually(t, 30*time.Second, "the test event's attempt listed", func() bool {
		do("open the endpoint", chromedp.Navigate(s.URL+"/console/webhooks/"+endpoint))
		deliveries = text("read the endpoint", "main")
		return strings.Contains(deliveries, "Resend")
	}, func() string { return deliveries })

	// Card payments this installation cannot take (it runs with test top-ups): rows of the Payments table.
	seedDeclinedPayments(t, s, accountOf(t, s, email).AccountID)

	// This month's statement, as the usage page links it.
	do("open the usage page", chromedp.Navigate(s.URL+"/console/usage"))
	heading("Usage")
	var statement string
	eval("read the statement's link", `document.querySelector('a[href^="/console/statements/"]').getAttribute("href")`, &statement)

	// The key's limits page, as the keys page links it.
	do("open the keys page", chromedp.Navigate(s.URL+"/console/keys"))
	var limits string
	eval("read the key's limits link", `document.querySelector('main a[href$="/limits"]').getAttribute("href")`, &limits)
	// A card payment's own page: the declined one seeded above (its page does not refresh itself).
	var declined models.Topup
	if err := s.DB.R.Where("account_id = ? AND state = ?", accountOf(t, s, email).AccountID, models.TopupFailed).Take(&declined).Error; err != nil {
		t.Fatalf("the declined payment: %v", err)
	}

	// A colleague who joined and an invitation still waiting: the members page shows its Change role,
	// Remove… and Withdraw controls. The owner's second session (over HTTP) sends the invitations.
	owner := newBrowser(t, s)
	if p := owner.post("/signin", "/signin", url.Values{"email": {email}, "password": {password}}); p.Status != 303 {
		t.Fatalf("sign in over HTTP: %d %s", p.Status, p.location())
	}
	const colleagueEmail = "colleague.with.a.long.address@example-videos.com"
	join(t, s, invite(t, s, owner, colleagueEmail, "developer"))
	invite(t, s, owner, "invited.and.still.waiting@example-videos.com", "viewer")
	colleague := userByEmail(t, s, colleagueEmail)

	// Every console page at both widths: the checks of look, and the kinds of cells each must show on
	// screen. A new console page is one line here. Task rows and call-log rows say what each is and when
	// ("what", "time"), in every card at a phone's width. The members page's role cells are "status" and
	// its Change role, Remove… and Withdraw controls "action".
	consolePages := []fitPage{
		{"dashboard", "/console", []string{"money", "status", "what", "time"}},
		{"tasks-all", "/console/tasks", []string{"money", "status", "what", "time"}},
		{"new-video", "/console/videos/new?model=videogen-2.0-720p", nil},
		{"task-completed", "/console/tasks/" + id, []string{"money"}},
		{"task-failed", "/console/tasks/" + failed, []string{"money"}},
		{"call-log", "/console/calls", []string{"money", "status", "what", "time"}},
		{"call", "/console/calls/" + createCall.RequestID, []string{"money"}},
		{"keys", "/console/keys", []string{"status", "action"}},
		{"key-limits", limits, nil},
		{"webhooks", "/console/webhooks", []string{"status"}},
		{"webhook", "/console/webhooks/" + endpoint, []string{"status", "action"}},
		{"wallet-payments", "/console/wallet", []string{"money", "status"}},
		{"topup-declined", "/console/wallet/topups/" + declined.ID, nil},
		{"account-page", "/console/account", nil},
		{"two-step-setup", "/console/2fa/setup", nil},
		{"members", "/console/members", []string{"status", "action"}},
		{"member-remove", fmt.Sprintf("/console/members/%d/remove", colleague.ID), nil},
		{"members-leave", "/console/members/leave", nil},
		{"usage", "/console/usage", []string{"money"}},
		{"usage-by-model", "/console/usage?group=model", []string{"money"}},
		{"usage-by-key", "/console/usage?group=key", []string{"money"}},
		{"statements", "/console/statements", nil},
		{"statement", statement, []string{"money"}},
		{"pricing-signed-in", "/pricing", []string{"money"}},
		{"api-docs", "/docs/api", nil},
	}
	for _, p := range consolePages {
		do("open "+p.path, chromedp.Navigate(s.URL+p.path))
		look(p.name, func(width int) { checkFit(t, browser, fmt.Sprintf("%s at %d px", p.name, width), p.want) })
	}

	// Signing out from a phone goes through the menu.
	do("sign out through the phone menu", chromedp.EmulateViewport(phoneWidth, phoneHeight), chromedp.Click(chromedp.CSS("header summary")))
	ctx, cancel = ctxFor()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`header .nav-panel button[type="submit"]`))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	cancel()
	do("resize back", chromedp.EmulateViewport(desktopWidth, desktopHeight))
	if p := path(); p != "/signin?notice=signed-out" {
		t.Fatalf("after signing out: %s", p)
	}
	look("signed-out")

	// The public pages, signed out.
	for _, p := range []string{"/pricing", "/terms", "/privacy", "/password/forgot", "/no-such-page"} {
		do("open "+p, chromedp.Navigate(s.URL+p))
		look(strings.ReplaceAll(strings.Trim(p, "/"), "/", "-"))
	}
}

// signedInHeader: the header shows a signed-in member (their Sign out button).
func signedInHeader(items []string) bool { return slices.Contains(items, "Sign out") }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
