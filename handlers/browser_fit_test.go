package handlers_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
	"videogen/models"
)

// fitPage is a page the browser tests check at a laptop's and a phone's width: a name (for its
// screenshots and the messages), its path, and the kinds of cells it must show on screen — "money",
// "status", "action", "what" (a task's prompt, a call's method and path), "time", as marked with data-fit
// in its markup. A new page is one line in a test's list.
type fitPage struct {
	name, path string
	want       []string
}

// fitLayout is what measureFit reads of the page at the browser's width.
type fitLayout struct {
	Width                    int
	ScrollWidth, ClientWidth int            // the page's: wider content scrolls it sideways
	Tables                   []string       // tables wider than their box, or not made to fit (table.fit)
	Cells                    []string       // data-fit cells hidden or (any part of them) off screen
	Kinds                    map[string]int // data-fit cells on screen, by kind
	ChartFont                float64        // the smallest chart label as drawn, in CSS pixels (0: no chart)
	Cards                    int            // table.fit rows laid out as cards (display: block)
	Rows                     int            // table.fit rows
	Bare                     []string       // table.fit rows without the "what" or "time" their table's other rows show
}

// measureFit checks every table in <main>: it is a table.fit (a list: a card per row on a phone) or a
// table.figures (a label and its amounts, as on the usage page and the statement: it stays a table), and
// neither it nor its box is wider than
// the box (no sideways scrolling); every data-fit cell that holds something is shown, and its content — every element and
// every line of text in it — lies inside the viewport and inside its table's box. It reads the rendered
// size of the charts' labels (font size times the SVG's scale) and how many table rows are cards. A
// table whose rows say what they are (data-fit="what") or when (data-fit="time") must say so in every row:
// on a phone each card then shows them (the cells' check above puts them on screen).
const measureFit = `(() => {
	const doc = document.documentElement, vw = window.innerWidth;
	const shown = el => { const r = el.getBoundingClientRect(); return el.checkVisibility({visibilityProperty: true, opacityProperty: true}) && r.width > 0 && r.height > 0; };
	const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + [...el.classList].map(c => "." + c).join("");
	const words = el => el.textContent.replace(/\s+/g, " ").trim().slice(0, 70);
	const tables = [];
	for (const table of document.querySelectorAll("main table")) {
		if (!table.matches(".fit, .figures")) tables.push(name(table) + " is neither a table.fit nor a table.figures (" + words(table) + ")");
		const box = table.closest(".table-wrap") || table.parentElement;
		const wide = Math.max(table.scrollWidth, box.scrollWidth, Math.ceil(table.getBoundingClientRect().width));
		if (wide > box.clientWidth + 1) tables.push(name(table) + ": " + wide + " px in a box of " + box.clientWidth);
	}
	// On a phone each card cell's label (its ::before) lies inside the cell: a label of two lines that
	// runs into the next row's label reads as one ("Account role Role").
	for (const td of document.querySelectorAll("main table.fit td[data-label]")) {
		const st = getComputedStyle(td, "::before");
		if (st.content === "none" || st.display === "none" || !shown(td)) continue;
		const h = parseFloat(st.height);
		if (!(h > 0)) continue;
		const top = st.position === "absolute" ? parseFloat(st.top) : parseFloat(getComputedStyle(td).paddingTop) + parseFloat(st.marginTop);
		if (top + h > td.clientHeight + 1) tables.push("the label " + JSON.stringify(td.dataset.label) + " runs out of its cell (" + Math.round(top + h) + " px in " + td.clientHeight + "), in: " + words(td.closest("tr") || td));
	}
	const cells = [], kinds = {};
	for (const cell of document.querySelectorAll("main [data-fit]")) {
		const kind = cell.dataset.fit, row = words(cell.closest("tr") || cell);
		if (cell.textContent.trim() === "" && !cell.querySelector("input, button, select, a")) continue; // nothing to show (a GET reserves no money)
		if (!shown(cell)) { cells.push(kind + " cell not shown, in: " + row); continue; }
		const wrap = cell.closest(".table-wrap"), box = wrap ? wrap.getBoundingClientRect() : {left: 0, right: vw};
		const left = Math.max(0, box.left), right = Math.min(vw, box.right);
		// Its lines of text, but not those of a label kept for screen readers only (.visually-hidden,
		// clipped to nothing on screen).
		const lines = [], walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
		for (let node = walk.nextNode(); node; node = walk.nextNode()) {
			if (node.parentElement.closest(".visually-hidden")) continue;
			const range = document.createRange();
			range.selectNodeContents(node);
			lines.push(...range.getClientRects());
		}
		const rects = [cell.getBoundingClientRect(), ...lines, ...[...cell.querySelectorAll("*")].filter(el => !el.closest(".visually-hidden") && shown(el)).map(el => el.getBoundingClientRect())];
		const out = rects.find(r => (r.width > 0 || r.height > 0) && (r.left < left - 0.5 || r.right > right + 0.5));
		if (out) { cells.push(kind + " cell spans " + Math.round(out.left) + "–" + Math.round(out.right) + " px of " + Math.round(left) + "–" + Math.round(right) + ": " + words(cell) + " (row: " + row + ")"); continue; }
		kinds[kind] = (kinds[kind] || 0) + 1;
	}
	let chartFont = 0;
	for (const text of document.querySelectorAll("main svg.chart text")) {
		if (!shown(text)) continue;
		const px = parseFloat(getComputedStyle(text).fontSize) * text.ownerSVGElement.getScreenCTM().a;
		chartFont = chartFont ? Math.min(chartFont, px) : px;
	}
	const rows = [...document.querySelectorAll("main table.fit tbody tr")];
	const bare = [];
	for (const table of document.querySelectorAll("main table.fit")) {
		for (const kind of ["what", "time"]) {
			if (!table.querySelector("tbody [data-fit=" + kind + "]")) continue;
			for (const tr of table.querySelectorAll("tbody tr")) {
				if (![...tr.querySelectorAll("[data-fit=" + kind + "]")].some(el => el.textContent.trim() !== "")) bare.push("a row without its " + kind + ": " + words(tr));
			}
		}
	}
	return {bare: bare.slice(0, 10), width: vw, scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth, tables, cells: cells.slice(0, 10), kinds, chartFont,
		cards: rows.filter(tr => getComputedStyle(tr).display === "block").length, rows: rows.length};
})()`

// minChartLabel is the smallest a chart's label may be drawn, in CSS pixels.
const minChartLabel = 11

// measureFitIn reads the fitLayout of the page the browser shows now.
func measureFitIn(t *testing.T, browser context.Context) fitLayout {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](measureFit))
	if err != nil {
		t.Fatalf("measure the tables: %v", err)
	}
	var l fitLayout
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("measure the tables: %v", err)
	}
	return l
}

// problems lists what does not fit, and which of the wanted kinds of cells the page did not show.
func (l fitLayout) problems(want []string) []string {
	out := append(append(slices.Clone(l.Tables), l.Cells...), l.Bare...)
	if l.ScrollWidth > l.ClientWidth {
		out = append(out, fmt.Sprintf("the page scrolls sideways: %d px of content in %d", l.ScrollWidth, l.ClientWidth))
	}
	for _, k := range want {
		if l.Kinds[k] == 0 {
			out = append(out, fmt.Sprintf("no %s cell on screen (data-fit=%q)", k, k))
		}
	}
	if l.ChartFont > 0 && l.ChartFont < minChartLabel {
		out = append(out, fmt.Sprintf("chart labels drawn %.1f px high, want at least %d", l.ChartFont, minChartLabel))
	}
	if l.Width < 900 && l.Cards != l.Rows {
		out = append(out, fmt.Sprintf("%d of %d table rows are not cards", l.Rows-l.Cards, l.Rows))
	}
	if l.Width >= 900 && l.Cards > 0 {
		out = append(out, fmt.Sprintf("%d table rows are cards at a laptop's width", l.Cards))
	}
	return out
}

// checkFit reports, as errors of the test, what does not fit on the page the browser shows now.
func checkFit(t *testing.T, browser context.Context, where string, want []string) fitLayout {
	t.Helper()
	l := measureFitIn(t, browser)
	for _, p := range l.problems(want) {
		t.Errorf("%s: %s", where, p)
	}
	return l
}

// seedDeclinedPayments gives an account two card payments that moved no money — one canceled at Stripe,
// one declined — so that the Payments tables have rows on an installation without Stripe (test top-ups).
// The ledger is untouched, as it is by such payments.
func seedDeclinedPayments(t *testing.T, s *testkit.Server, accountID int64) {
	t.Helper()
	now := time.Now()
	for _, tp := range []models.Topup{
		{ID: "topup_" + randID("c"), State: models.TopupCanceled, AmountMicros: 50_000_000, CreatedAt: now.Add(-2 * time.Hour)},
		{ID: "topup_" + randID("d"), State: models.TopupFailed, AmountMicros: 1_250_500_000, Failure: "Your card was declined.", CreatedAt: now.Add(-time.Hour)},
	} {
		tp.AccountID, tp.Source, tp.UpdatedAt = accountID, models.TopupCheckout, tp.CreatedAt
		if err := s.DB.W.Create(&tp).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// randID is a prefix and 20 random letters and digits.
func randID(prefix string) string {
	const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = abc[int(b[i])%len(abc)]
	}
	return prefix + string(b)
}
