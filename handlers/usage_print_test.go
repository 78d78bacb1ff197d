package handlers_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
)

// TestStatementPrints: printed (CSS media print), a statement is the statement alone — no header,
// navigation, buttons or links to other months — with its billing details and figures; on screen the
// console's navigation is there.
func TestStatementPrints(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
	b := signUpVerified(t, s, "print@example.com")
	addFunds(t, b, "12.50")
	saveBilling(t, b, url.Values{"billing_name": {"Kite Films GmbH"}})
	base, _ := url.Parse(s.URL)
	browser := chromium(t)
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	for _, c := range b.c.Jar.Cookies(base) {
		if _, err := chromedp.Call(ctx, network.SetCookie, network.SetCookieParams{Name: c.Name, Value: c.Value, URL: s.URL}); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/console/statements/"+time.Now().UTC().Format("2006-01")), chromedp.WaitVisible(chromedp.ID("summary"))); err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Header, Nav, Summary, Billed, Months bool
		Text                                 string
	}
	const look = `(() => { const vis = sel => { const el = document.querySelector(sel); return !!el && el.checkVisibility(); };
		return {header: vis("header.top"), nav: vis("nav.main"), summary: vis("#summary"), billed: vis("#billed-to"),
			months: vis('nav[aria-label="Statements"]'), text: document.querySelector("#billed-to").innerText}; })()`
	read := func() shown {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[shown](look))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read(); !v.Header || !v.Nav || !v.Summary || !v.Months {
		t.Fatalf("on screen: %+v", v)
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"}); err != nil {
		t.Fatal(err)
	}
	if v := read(); v.Header || v.Nav || v.Months || !v.Summary || !v.Billed || v.Text == "" {
		t.Fatalf("printed: %+v, want the statement alone", v)
	}
}
