package handlers_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
)

// TestBrowserWebhookDeliveriesFollow: an endpoint's page, open in a real browser, shows a delivery made
// after it was opened — a test event sent from another browser — without a reload (the page it opened
// is still the one shown), says so instead of "reload", and an older page of attempts does not follow.
func TestBrowserWebhookDeliveriesFollow(t *testing.T) {
	rcv := &hookReceiver{}
	s, _ := startHooks(t, testkit.SQLiteURL(t), nil, rcv)
	const email = "live.hooks@example.com"
	b := signUpVerified(t, s, email)
	b.submit("/console/webhooks", "url", url.Values{"url": {"https://hooks.example.com/live"}, "events": {"video.completed"}})
	m := endpointLinkRE.FindStringSubmatch(b.get("/console/webhooks").Body)
	if m == nil {
		t.Fatal("no endpoint")
	}
	page := "/console/webhooks/" + m[1]

	browser := chromium(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, js string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	do("sign in", chromedp.Navigate(s.URL+"/signin"), chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), "paper-boats-float-42"))
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`main form button[type="submit"]`))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	cancel()

	do("open the endpoint", chromedp.Navigate(s.URL+page))
	if got := eval("mark the page", `(() => { window.openedOnce = "yes";
		return [document.querySelector(".live-nojs").hidden, document.querySelector(".live-js").hidden, document.querySelectorAll("table.deliveries tbody tr").length].join(" "); })()`); got != "true false 0" {
		t.Fatalf("the page before any delivery (nojs hidden, js hidden, rows): %s", got)
	}
	// Another browser of the same account sends a test event.
	if p := b.submit(page, "type", url.Values{"type": {"video.completed"}}); p.Status != 303 {
		t.Fatalf("send a test event: %d", p.Status)
	}
	got := eval("wait for the delivery in the open page", `new Promise(ok => { const check = () => {
		const row = document.querySelector("table.deliveries tbody tr");
		row ? ok(window.openedOnce + " " + row.textContent.replace(/\s+/g, " ")) : setTimeout(check, 100); }; check(); })`)
	if !strings.HasPrefix(got, "yes ") || !strings.Contains(got, "video.completed") || !strings.Contains(got, "test") || !strings.Contains(got, "delivered") {
		t.Fatalf("the delivery as the open page shows it: %q", got)
	}

	// An older page is a snapshot: it says nothing of following and has nothing that follows.
	do("open an older page", chromedp.Navigate(s.URL+page+"?before=1"))
	if got := eval("read the older page", `String(document.querySelectorAll("[data-follow-every], .live-js").length)`); got != "0" {
		t.Errorf("an older page of attempts follows new ones: %s elements", got)
	}
}
