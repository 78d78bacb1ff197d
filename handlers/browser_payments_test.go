package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
	"videogen/models"
)

// checkoutPage stands in for Stripe's hosted payment page, which this machine cannot reach.
const checkoutPage = `<!doctype html><html><head><title>Stripe Checkout (test)</title></head><body><h1>Stripe Checkout (test)</h1></body></html>`

// interceptCheckout answers the browser's requests for https://checkout.stripe.com/ with checkoutPage
// (the network is never asked), and returns the documents it answered so far ("GET https://…").
func interceptCheckout(t *testing.T, browser context.Context) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(browser)
	var mu sync.Mutex
	var documents []string
	paused := chromedp.Events(ctx, fetch.RequestPaused) // subscribed before the first request can pause
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "https://checkout.stripe.com/*"}}}); err != nil {
		cancel()
		t.Fatalf("intercept Stripe Checkout: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev, err := range paused {
			if err != nil {
				return
			}
			if ev.ResourceType == network.ResourceTypeDocument {
				mu.Lock()
				documents = append(documents, ev.Request.Method+" "+ev.Request.URL)
				mu.Unlock()
			}
			_, _ = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "text/html; charset=utf-8"}}, Body: []byte(checkoutPage)})
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), documents...)
	}
}

// consoleLog collects what the browser's console shows (its errors say why a navigation was refused),
// and returns the messages so far.
func consoleLog(t *testing.T, browser context.Context) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(browser)
	var mu sync.Mutex
	var lines []string
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			mu.Lock()
			lines = append(lines, string(m.Type)+": "+m.Text)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// TestBrowserCardTopUp pays for a top-up in a real browser: sign in, type an amount on the wallet page,
// tick "save this card", continue to payment and land on the Checkout Session's page that stripe-mock
// made (answered by the test: no internet here). Back on Stripe's success URL the page waits and does not
// credit; once the signed webhook arrives, the waiting page reloads itself and shows the credit, and so
// does the wallet, at a laptop's and a phone's width.
func TestBrowserCardTopUp(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		const email, password = "card.payer@example.com", "paper-boats-float-42"
		s, front := stripeServer(t, dbURL, nil)
		signUpVerified(t, s, email) // over HTTP: the browser signs in on its own below
		u := accountOf(t, s, email)
		browser := chromium(t)
		checkouts := interceptCheckout(t, browser)
		console := consoleLog(t, browser)

		ctxFor := func() (context.Context, context.CancelFunc) { return context.WithTimeout(browser, 20*time.Second) }
		do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
			t.Helper()
			ctx, cancel := ctxFor()
			defer cancel()
			if err := chromedp.Do(ctx, steps...); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		// press clicks a button that sends the browser to another page and waits for that page.
		press := func(what string, button chromedp.Action[chromedp.Void]) *network.Response {
			t.Helper()
			ctx, cancel := ctxFor()
			defer cancel()
			resp, err := chromedp.RunResponse(ctx, button)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return resp
		}
		text := func(what string, sel chromedp.CSS) string {
			t.Helper()
			ctx, cancel := ctxFor()
			defer cancel()
			v, err := chromedp.Run(ctx, chromedp.Text(sel))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return strings.TrimSpace(v)
		}
		eval := func(what, js string, into any) {
			t.Helper()
			ctx, cancel := ctxFor()
			defer cancel()
			v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](js))
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if err := json.Unmarshal(v, into); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
		}
		address := func() string {
			t.Helper()
			var href string
			eval("read the address bar", `location.href`, &href)
			return href
		}
		// mainText is what the page's <main> shows, white space made single.
		mainText := func() string {
			t.Helper()
			return strings.Join(strings.Fields(text("read the page", "main")), " ")
		}
		refresh := func() string {
			t.Helper()
			var r string
			eval("read the meta refresh", `document.querySelector('meta[http-equiv="refresh"]')?.content ?? ""`, &r)
			return r
		}
		// payments reads the rows of the wallet's Payments table, cell by cell.
		payments := func() [][]string {
			t.Helper()
			var rows [][]string
			eval("read the payments", `(() => {
				const h = [...document.querySelectorAll("main h2")].find(h => h.textContent.trim() === "Payments");
				const table = h && h.nextElementSibling && h.nextElementSibling.querySelector("table");
				if (!table) return [];
				return [...table.querySelectorAll("tbody tr")].map(tr => [...tr.cells].map(td => td.textContent.replace(/\s+/g, " ").trim()));
			})()`, &rows)
			return rows
		}

		do("open the sign-in page", chromedp.Navigate(s.URL+"/signin"),
			chromedp.SetValue(chromedp.ID("email"), email), chromedp.SetValue(chromedp.ID("password"), password))
		press("sign in", chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)))
		if h1 := text("read the heading", "h1"); !strings.Contains(h1, "Dashboard") {
			t.Fatalf("signing in in the browser led to %s, heading %q", address(), h1)
		}

		// The top-up form: an amount typed with cents, the card kept for auto-recharge.
		do("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"))
		if got := text("read the balance", "#available"); got != "$0.00" {
			t.Fatalf("a new wallet shows %q available", got)
		}
		do("fill in the top-up form", chromedp.SendKeys(chromedp.ID("amount"), "25.50"), chromedp.Click(chromedp.ID("save_card")))
		ctx, cancel := ctxFor()
		resp, err := chromedp.RunResponse(ctx,
			chromedp.Click(chromedp.Search(`//main//form//button[@type="submit" and normalize-space()="Continue to payment"]`)))
		cancel()
		href := address()
		if err != nil || !strings.HasPrefix(href, "https://checkout.stripe.com/") || resp.URL != href || resp.Status != 200 {
			t.Fatalf("continuing to payment left the browser at %s (%v), not on Stripe Checkout; the console says %q", href, err, console())
		}
		if got := checkouts(); len(got) != 1 || got[0] != "GET "+href {
			t.Fatalf("the browser asked Stripe Checkout for %q, want one GET %s", got, href)
		}
		if title := text("read Stripe's page", "h1"); title != "Stripe Checkout (test)" {
			t.Fatalf("the browser shows %q, not the stand-in for Stripe's page", title)
		}

		// The pending top-up and its Checkout Session are what the browser asked for.
		var top models.Topup
		if err := s.DB.R.Order("created_at DESC").Take(&top).Error; err != nil {
			t.Fatal(err)
		}
		if top.State != models.TopupPending || top.AmountMicros != 25_500_000 || !top.SaveCard || top.StripeSessionID == nil || top.AccountID != u.AccountID {
			t.Fatalf("pending top-up: %+v", top)
		}
		sessions := front.Calls("/v1/checkout/sessions")
		if len(sessions) != 1 {
			t.Fatalf("%d Checkout Sessions created, want 1", len(sessions))
		}
		f := sessions[0].Form
		success := f.Get("success_url")
		if success != s.URL+"/console/wallet/topups/"+top.ID || f.Get("line_items[0][price_data][unit_amount]") != "2550" ||
			f.Get("payment_intent_data[setup_future_usage]") != "off_session" || f.Get("client_reference_id") != top.ID {
			t.Fatalf("the session asked Stripe for %v", f)
		}

		// Until Stripe confirms, the wallet lists the payment as waiting and adds nothing.
		do("open the wallet while Stripe has not confirmed", chromedp.Navigate(s.URL+"/console/wallet"))
		if got := text("read the balance", "#available"); got != "$0.00" {
			t.Fatalf("before Stripe confirms, the wallet shows %q available", got)
		}
		if rows := payments(); len(rows) != 1 || len(rows[0]) != 4 || rows[0][1] != "Card" || rows[0][2] != "$25.50" || rows[0][3] != "Waiting for payment" {
			t.Fatalf("before Stripe confirms, the payments table reads %q", rows)
		}
		if got := available(t, s, u.AccountID); got != 0 || len(ledgerKinds(t, s, u.AccountID, models.KindTopup)) != 0 {
			t.Fatalf("the wallet was credited before the webhook: %d micros", got)
		}

		// Stripe sends the customer back before its webhook: the page waits and credits nothing. While it
		// is open the webhook arrives, and the page's own reload shows the credit.
		do("return from Stripe", chromedp.Navigate(success))
		if h1 := text("read the heading", "h1"); h1 != "Card top-up" {
			t.Fatalf("the success URL shows %q", h1)
		}
		shown := mainText()
		for _, want := range []string{"Waiting for Stripe to confirm your payment of $25.50. This page updates by itself.",
			"Your available balance is $0.00; it goes up when the payment is confirmed."} {
			if !strings.Contains(shown, want) {
				t.Fatalf("the waiting page lacks %q: %q", want, shown)
			}
		}
		if strings.Contains(shown, "Payment received") {
			t.Fatalf("the waiting page says the payment was received: %q", shown)
		}
		if r := refresh(); r != "3;url=/console/wallet/topups/"+top.ID+"?wait=1" {
			t.Fatalf("the waiting page refreshes with %q", r)
		}
		if got := available(t, s, u.AccountID); got != 0 || len(ledgerKinds(t, s, u.AccountID, models.KindTopup)) != 0 {
			t.Fatalf("the success page credited the wallet: %d micros available", got)
		}
		ev := testkit.StripeEvent("evt_browser_"+top.ID, "checkout.session.completed", sessionObject(&top, 2550, "paid"))
		if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		var notice string
		testkit.Eventually(t, 10*time.Second, "the waiting page shows the credit", func() bool {
			ctx, cancel := ctxFor()
			notice, err = chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("main .notice")?.textContent.trim() ?? ""`))
			cancel()
			return err == nil && strings.HasPrefix(notice, "Payment received")
		}, func() string { return fmt.Sprintf("still %q at %s, %v", notice, address(), err) })
		if notice != "Payment received: $25.50 was added to your wallet." {
			t.Fatalf("after the webhook the page says %q", notice)
		}
		if href := address(); !strings.HasPrefix(href, success+"?wait=") {
			t.Fatalf("the page reloaded itself to %s", href)
		}
		if got := text("read the balance", "#available"); got != "$25.50" {
			t.Fatalf("after the credit the top-up page shows %q available", got)
		}
		if r := refresh(); r != "" {
			t.Fatalf("the credited page still reloads itself: %q", r)
		}

		// The wallet shows the credit, at both widths, without scrolling sideways.
		do("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"))
		if got := text("read the balance", "#available"); got != "$25.50" {
			t.Fatalf("after the credit the wallet shows %q available", got)
		}
		if rows := payments(); len(rows) != 1 || len(rows[0]) != 4 || rows[0][2] != "$25.50" || !strings.HasPrefix(rows[0][3], "Paid and credited") {
			t.Fatalf("after the credit the payments table reads %q", rows)
		}
		if page := mainText(); !strings.Contains(page, "Top-up (card)") {
			t.Fatalf("the history does not show the card top-up: %q", page)
		}
		for _, w := range []struct{ width, height int64 }{{phoneWidth, phoneHeight}, {desktopWidth, desktopHeight}} {
			do("resize", chromedp.EmulateViewport(w.width, w.height))
			var l pageLayout
			eval("measure the wallet", measureLayout, &l)
			if l.ScrollWidth > l.ClientWidth || l.Tables != l.WrappedTables {
				t.Errorf("the wallet at %d px: %d px of content in %d (sticking out: %q); %d of %d tables in a .table-wrap",
					w.width, l.ScrollWidth, l.ClientWidth, l.Overflowing, l.WrappedTables, l.Tables)
			}
		}
		ctx, cancel = ctxFor()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
		cancel()
		if err != nil {
			t.Fatalf("photograph the wallet: %v", err)
		}
		if err := os.WriteFile(filepath.Join(t.TempDir(), "wallet-credited.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}

		if got := available(t, s, u.AccountID); got != 25_500_000 {
			t.Fatalf("available %d micros after the credit, want 25.50 dollars", got)
		}
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 1 || es[0].DeltaAvailable != 25_500_000 {
			t.Fatalf("topup entries: %+v", es)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
