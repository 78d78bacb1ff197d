package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
)

// TestBrowserLiveTaskPages opens pages of queued videos in a real browser and watches them follow the
// videos without a reload: the task page shows its status and progress change and then the player, a
// failed task's page shows its refund the moment it fails, and the Tasks list updates its row and then
// shows the finished row (its thumbnail). A variable set in the page when it was opened is still set at
// the end: the browser never navigated.
//
// One simulated upstream slot makes each video wait behind a blocker created just before it, so each
// page is opened while its video is queued (SIM_DURATION per video, 3 s).
func TestBrowserLiveTaskPages(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"TEST_TOPUPS": "1", "SIM_DURATION": "3s",
		"SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1"})
	const email = "live.pages@example.com"
	b := signUpVerified(t, s, email)
	addFunds(t, b, "20")
	key := createKey(t, b, "live")
	queued := func(prompt string, media ...map[string]any) string {
		t.Helper()
		s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "holds the only slot"})
		body := map[string]any{"model": "videogen-2.0-mini-480p", "prompt": prompt}
		for _, m := range media {
			for k, v := range m {
				body[k] = v
			}
		}
		return s.CreateVideo(t, key, body)["id"].(string)
	}
	// The first video starts from an image and has a style reference: its page shows both.
	up := s.Upload(t, key, "", testkit.File("input_reference", "first.png", testkit.PNG(t, 64, 48)),
		testkit.File("image_files", "style.png", testkit.PNG(t, 48, 48))).Answer(t)

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
	photo := func(name string) {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%02d-%s.png", n, name)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	// eval runs js (awaiting a promise) for at most 30 s: the waits below are for conditions in the page.
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
	// Before any page's script runs, fetch is wrapped to record each status request: when it was sent
	// (performance.now(), ms) and the openai-poll-after-ms header its answer carried.
	run("record the status requests of every page", func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: recordStatusFetches})
		return chromedp.Void{}, err
	})
	// polledAsTold checks the status requests of the page shown now, whose tasks have ended: each came no
	// sooner after the one before for the same task than that one's answer said (openai-poll-after-ms;
	// a list polls each of its running tasks on its own), and none comes in an
	// observation window of 2.5 s after the end. That window is the one deliberate wait of this test: a
	// request that is never sent has no condition to wait for.
	polledAsTold := func(what string) {
		t.Helper()
		type fetch struct {
			Task  string
			At    float64
			After int // the answer's openai-poll-after-ms; 0 if it has not come
		}
		read := func() []fetch {
			var fs []fetch
			if err := json.Unmarshal([]byte(eval(what+": read the status requests", `JSON.stringify(window.statusFetches || null)`)), &fs); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return fs
		}
		before := read()
		if len(before) < 2 {
			t.Fatalf("%s: %d status requests while the task ran, want at least 2", what, len(before))
		}
		const tolerance = 25 // ms: timers fire on the event loop's own clock
		last := map[string]fetch{}
		for i, f := range before {
			prev, ok := last[f.Task]
			last[f.Task] = f
			if !ok {
				continue
			}
			if prev.After < 1000 {
				t.Errorf("%s: a status answer for %s carried openai-poll-after-ms %d, want at least 1000", what, f.Task, prev.After)
			}
			if gap := f.At - prev.At; gap < float64(prev.After-tolerance) {
				t.Errorf("%s: status request %d (%s) came %.0f ms after the one before for its task, whose answer said to wait %d ms", what, i+1, f.Task, gap, prev.After)
			}
		}
		eval(what+": watch for 2.5 s", `new Promise(ok => setTimeout(() => ok(""), 2500))`)
		if after := read(); len(after) != len(before) {
			t.Errorf("%s: %d status requests after the task ended (polling did not stop)", what, len(after)-len(before))
		}
		t.Logf("%s: status requests %+v", what, before)
	}
	run("open the sign-in page", chromedp.Navigate(s.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), "paper-boats-float-42"))
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`main form button[type="submit"]`))); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	cancel()

	// watch marks the page as opened and records every state its live element goes through.
	const watch = `(() => {
		window.openedOnce = "yes";
		window.seen = [];
		const note = () => {
			const el = document.querySelector(%q);
			if (!el) return;
			const p = el.querySelector("span[data-task-field=progress]");
			const s = el.getAttribute("data-task-status") + (p && !p.hidden ? " " + p.textContent : "");
			if (window.seen[window.seen.length - 1] !== s) window.seen.push(s);
		};
		note();
		new MutationObserver(note).observe(document.querySelector("main"), {subtree: true, childList: true, characterData: true, attributes: true});
		const hint = document.querySelector(".live-nojs"), follows = document.querySelector(".live-js");
		return (hint ? (hint.hidden ? "hint hidden" : "hint shown") : "no hint") + ", " + (follows ? (follows.hidden ? "follows hidden" : "follows shown") : "no follows");
	})()`
	// until waits in the page for a condition (a JavaScript expression) and returns what the page went
	// through, and whether it is still the page that was opened.
	until := func(what, cond string) (seen []string, same bool) {
		t.Helper()
		got := eval(what, `new Promise(ok => { const check = () => (`+cond+`) ? ok(JSON.stringify({seen: window.seen, same: window.openedOnce === "yes"})) : setTimeout(check, 50); check(); })`)
		var r struct {
			Seen []string
			Same bool
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil {
			t.Fatalf("%s: %v (%s)", what, err, got)
		}
		return r.Seen, r.Same
	}
	inProgress := regexp.MustCompile(`^in_progress (\d+)%$`)
	sawProgress := func(seen []string) bool {
		for _, s := range seen {
			if m := inProgress.FindStringSubmatch(s); m != nil {
				if n, _ := strconv.Atoi(m[1]); n > 0 && n < 100 {
					return true
				}
			}
		}
		return false
	}

	// The task page: queued, then in progress with its progress, then the player.
	id := queued("a heron lifts off the river", map[string]any{"start_image_url": up.StartImageURL, "image_urls": up.ImageURLs})
	run("open the task page", chromedp.Navigate(s.URL+"/console/tasks/"+id))
	region := fmt.Sprintf("[data-task-id=%q]", id)
	if hints := eval("watch the task page", fmt.Sprintf(watch, region)); hints != "hint hidden, follows shown" {
		t.Errorf("with the script running: %s; want the reload hint hidden and the following note shown", hints)
	}
	photo("task-queued")
	until("wait for the progress", `document.querySelector(`+strconv.Quote(region)+`).getAttribute("data-task-status") === "in_progress"`)
	photo("task-in-progress")
	seen, same := until("wait for the player", `document.querySelector("main video")`)
	if !same {
		t.Fatal("the task page navigated to show the player")
	}
	if len(seen) < 3 || seen[0] != "queued 0%" || !sawProgress(seen) || seen[len(seen)-1] != "completed" {
		t.Errorf("the task page went through %q; want queued 0%%, in_progress with its progress, completed", seen)
	}
	if w := eval("play the video", `new Promise((ok, fail) => { const v = document.querySelector("main video");
		if (v.readyState >= 1) return ok(String(v.videoWidth));
		v.addEventListener("loadedmetadata", () => ok(String(v.videoWidth))); v.addEventListener("error", () => fail("cannot play")); })`); w == "0" {
		t.Error("the player that appeared plays nothing")
	}
	// Its inputs show in the browser (the page's CSP takes them from this origin), labelled.
	if inputs := eval("load the inputs", `Promise.all([...document.querySelectorAll(".task-inputs img")].map(img => img.decode().then(
		() => img.alt + " " + img.naturalWidth + "x" + img.naturalHeight, () => img.alt + " did not load"))).then(all => all.join(", "))`); inputs != "First frame 64x48, Reference image 1 48x48" {
		t.Errorf("the task's inputs in the browser: %s", inputs)
	}
	polledAsTold("the task page")
	photo("task-completed")
	if text := eval("read the page", `document.querySelector("main").innerText`); !strings.Contains(text, "Download MP4") || strings.Contains(text, "Not ready yet") ||
		!strings.Contains(text, "Charged for a video") {
		t.Errorf("the finished page as it shows now:\n%s", text)
	}
	// The video's links stand apart: at least half a line between the download button and the next link.
	if gap := eval("measure the links' gap", `(() => { const [a, b] = document.querySelectorAll(".video-links a");
		if (!b) return "no second link";
		const ra = a.getBoundingClientRect(), rb = b.getBoundingClientRect();
		return String(rb.top >= ra.bottom ? 99 : Math.round(rb.left - ra.right)); })()`); gap == "no second link" {
		t.Error("the finished page shows no spritesheet link beside Download MP4")
	} else if px, err := strconv.Atoi(gap); err != nil || px < 8 {
		t.Errorf("Download MP4 and the Spritesheet link are %s px apart, want at least 8", gap)
	}

	// A failed video's page shows the refund when it fails.
	id = queued("a storm over the bay [sim:fail]")
	run("open the failing task's page", chromedp.Navigate(s.URL+"/console/tasks/"+id))
	region = fmt.Sprintf("[data-task-id=%q]", id)
	eval("watch the failing task's page", fmt.Sprintf(watch, region))
	seen, same = until("wait for the refund", `document.querySelector("[data-task-refund]")`)
	if !same || len(seen) < 2 || seen[0] != "queued 0%" || seen[len(seen)-1] != "failed" {
		t.Errorf("the failing task's page went through %q (same page: %v)", seen, same)
	}
	polledAsTold("the failing task's page")
	photo("task-failed")
	if refund := eval("read the refund", `document.querySelector("[data-task-refund]").textContent`); refund != "Refunded: the $0.20 reserved for this video is back in your available balance. Nothing was charged." {
		t.Errorf("refund notice %q", refund)
	}

	// The Tasks list: the queued row follows its video, then shows as the list shows a finished one.
	id = queued("lanterns drift on a lake")
	run("open the tasks list", chromedp.Navigate(s.URL+"/console/tasks"))
	row := fmt.Sprintf("tr[data-task-id=%q]", id)
	eval("watch the list", fmt.Sprintf(watch, row))
	photo("list-queued")
	seen, same = until("wait for the row's thumbnail", `document.querySelector(`+strconv.Quote(row+" img")+`)`)
	if !same || len(seen) < 3 || seen[0] != "queued 0%" || !sawProgress(seen) || seen[len(seen)-1] != "completed" {
		t.Errorf("the list's row went through %q (same page: %v)", seen, same)
	}
	polledAsTold("the tasks list")
	photo("list-completed")
	if cells := eval("read the row", `[...document.querySelectorAll(`+strconv.Quote(row+" [data-task-field]")+`)].map(el => el.getAttribute("data-task-field") + "=" + el.textContent.trim().replace(/\s+/g, " ")).join(", ")`); cells != "status=completed, amount=$0.20, billing=settled" {
		t.Errorf("the finished row's fields: %s", cells)
	}

	// The dashboard: when a Recent videos row ends, the balances above it follow the same event.
	id = queued("a paper crane unfolds")
	run("open the dashboard", chromedp.Navigate(s.URL+"/console"))
	const reservedJS = `document.querySelector("#balances .card:nth-child(2) .value").textContent`
	if held := eval("read the reserved balance", reservedJS); held == "$0.00" {
		t.Fatalf("the dashboard shows nothing reserved while two videos run")
	}
	row = fmt.Sprintf("tr[data-task-id=%q]", id)
	eval("watch the dashboard", fmt.Sprintf(watch, row))
	seen, same = until("wait for the dashboard row's thumbnail", `document.querySelector(`+strconv.Quote(row+" img")+`)`)
	if !same || len(seen) == 0 || seen[len(seen)-1] != "completed" {
		t.Errorf("the dashboard's row went through %q (same page: %v)", seen, same)
	}
	// The row and the balances are replaced from one fetch of the page: once the row shows its thumbnail,
	// the balances are the fresh ones (the wait is only for the DOM to settle, a few frames).
	held := eval("read the balances after the row ended", `new Promise(ok => { const t0 = performance.now();
		(function check() { const v = `+reservedJS+`; if (v === "$0.00" || performance.now() - t0 > 5000) return ok(v); requestAnimationFrame(check); })(); })`)
	if held != "$0.00" {
		t.Errorf("the dashboard still shows %s reserved after its last running video completed", held)
	}
	photo("dashboard-after")
}

// recordStatusFetches wraps fetch, before the page's own scripts run, to record in window.statusFetches
// each request of GET /console/tasks/{id}/status: its task, when it was sent and the openai-poll-after-ms header of
// its answer.
const recordStatusFetches = `(() => {
	window.statusFetches = [];
	const real = window.fetch;
	window.fetch = function (input, init) {
		const answer = real.apply(this, arguments);
		const url = new URL(typeof input === "string" ? input : input.url, location.href);
		if (/^\/console\/tasks\/[^/]+\/status$/.test(url.pathname)) {
			const rec = {task: url.pathname.split("/")[3], at: performance.now(), after: 0};
			window.statusFetches.push(rec);
			answer.then(r => { rec.after = parseInt(r.headers.get("openai-poll-after-ms"), 10) || 0; }, () => {});
		}
		return answer;
	};
})()`
