package handlers_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"videogen/internal/testkit"
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

// TestBrowserJourney walks a new customer through the console in a real browser: sign up, verify from the
// e-mail, add test funds, create a key, use it over HTTP, watch the video complete, play and download it,
// find the call in the call log. A screenshot of each page goes to tmp/screenshots/TestBrowserJourney.
func TestBrowserJourney(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"TEST_TOPUPS": "1", "SIM_DURATION": "1s"})
	browser := chromium(t)
	shots, _ := filepath.Abs(filepath.Join("..", "tmp", "screenshots", t.Name()))
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
	submit := func(what string) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`main form button[type="submit"]`))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		ctx, cancel := ctxFor()
		defer cancel()
		buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		n++
		if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%02d-%s.png", n, name)), buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	heading := func(want string) {
		t.Helper()
		if h1 := text("read the heading", "h1"); !strings.Contains(h1, want) {
			t.Fatalf("heading %q, want %q", h1, want)
		}
	}
	const email, password = "journey@example.com", "paper-boats-float-42"

	do("open the home page", chromedp.Navigate(s.URL+"/"))
	heading("Generate videos")
	shot("home")

	do("open the sign-up page", chromedp.Navigate(s.URL+"/signup"))
	shot("signup")
	do("fill in the sign-up form", chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("terms")))
	submit("sign up")
	heading("Check your inbox")
	shot("check-inbox")

	link := mailedLink(t, s, email)
	do("open the verification link", chromedp.Navigate(s.URL+link))
	heading("Confirm your e-mail address")
	submit("confirm the address")
	heading("Your e-mail address is confirmed")
	shot("verified")

	do("open the sign-in page", chromedp.Navigate(s.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("email"), email), chromedp.SendKeys(chromedp.ID("password"), password))
	submit("sign in")
	heading("Dashboard")
	shot("dashboard-new")

	do("open the wallet", chromedp.Navigate(s.URL+"/console/wallet"), chromedp.SendKeys(chromedp.ID("amount"), "25"))
	submit("add test funds")
	if notice := text("read the notice", ".notice.ok"); !strings.Contains(notice, "Test funds were added") {
		t.Fatalf("after adding funds: %q", notice)
	}
	shot("wallet")

	do("open the keys page", chromedp.Navigate(s.URL+"/console/keys"), chromedp.SendKeys(chromedp.ID("name"), "journey laptop"))
	submit("create a key")
	secret := text("read the new key", "#new-secret")
	if !strings.HasPrefix(secret, "vg_") {
		t.Fatalf("secret %q", secret)
	}
	shot("key-created")

	// The key works over HTTP, from outside the browser.
	id := s.CreateVideo(t, secret, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a paper boat on a rainy street"})["id"].(string)

	deadline := time.Now().Add(60 * time.Second)
	for {
		do("open the tasks page", chromedp.Navigate(s.URL+"/console/tasks"))
		if row := text("read the newest task", "tbody tr"); strings.Contains(row, id) && strings.Contains(row, "completed") {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the task never showed as completed: %q", row)
		}
		time.Sleep(300 * time.Millisecond)
	}
	shot("tasks")

	do("open the task", chromedp.Navigate(s.URL+"/console/tasks/"+id))
	ctx, cancel := ctxFor()
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
	shot("task")
	ctx, cancel = ctxFor()
	download, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("a[download]").href)
		.then(async r => r.status + "|" + r.headers.get("content-type") + "|" + (await r.arrayBuffer()).byteLength)`, chromedp.EvalAwaitPromise))
	cancel()
	if err != nil || !strings.HasPrefix(download, "200|video/mp4|") || strings.HasSuffix(download, "|0") {
		t.Fatalf("download in the browser: %q %v", download, err)
	}

	do("open the call log", chromedp.Navigate(s.URL+"/console/calls"))
	if calls := text("read the call log", "tbody"); !strings.Contains(calls, "POST /v1/videos") || !strings.Contains(calls, id) {
		t.Fatalf("the call log does not show the create call: %q", calls)
	}
	shot("calls")
	do("open the dashboard", chromedp.Navigate(s.URL+"/console"))
	shot("dashboard")
}
