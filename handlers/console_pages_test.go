package handlers_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"videogen/internal/testkit"
	"videogen/models"
)

var secretRE = regexp.MustCompile(`id="new-secret">(vg_[A-Za-z0-9]+)<`)

// createKey makes a key through the console and returns its secret.
func createKey(t *testing.T, b *browser, name string) string {
	t.Helper()
	p := b.post("/console/keys", "/console/keys", url.Values{"name": {name}})
	m := secretRE.FindStringSubmatch(p.Body)
	if p.Status != 200 || m == nil {
		t.Fatalf("create key: %d", p.Status)
	}
	return m[1]
}

func addFunds(t *testing.T, b *browser, usd string) {
	t.Helper()
	if p := b.submit("/console/wallet", "amount", url.Values{"amount": {usd}}); p.Status != 303 {
		t.Fatalf("add funds: %d", p.Status)
	}
}

func TestDashboardGuidesANewAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "dee@example.com")
		p := b.get("/console")
		p.contains(t, "Get started", "Add funds", "Create an API key", "Make your first request", s.Cfg.PublicBaseURL+"/v1/videos", `data-copy="first-curl"`, "No videos yet")
		// The steps link to the pages they name.
		steps := regexp.MustCompile(`(?s)<ol class="steps">.*?</ol>`).FindString(p.Body)
		for _, link := range []string{`<a href="/console/wallet">Wallet page</a>`, `<a href="/console/keys">API keys page</a>`} {
			if !strings.Contains(steps, link) {
				t.Errorf("the get-started steps lack %s:\n%s", link, steps)
			}
		}
		addFunds(t, b, "20")
		key := createKey(t, b, "dash")
		v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "dashboard", "seconds": 6})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed")

		p = b.get("/console")
		p.lacks(t, "Get started")                          // every step is done
		p.contains(t, "$19.70", "$0.30", v["id"].(string)) // available after a $0.30 charge; spent in 30 days; the task and what it shows:
		p.contains(t, `<td class="prompt" data-label="Prompt" data-fit="what">dashboard</td>`)
		if !regexp.MustCompile(`<rect class="bar" [^>]*height="[1-9][0-9.]*"><title>[A-Z][a-z]{2} [0-9]+: \$0\.30</title>`).MatchString(p.Body) {
			t.Fatalf("the spend chart has no bar for today's $0.30:\n%s", trimPage(p.Body))
		}
	})
}

func TestKeysPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1", "API_KEY_CACHE_TTL": "1h"})
		b := signUpVerified(t, s, "kai@example.com")
		b.get("/console/keys").contains(t, "No keys yet")

		p := b.post("/console/keys", "/console/keys", url.Values{"name": {"production server"}})
		secret := secretRE.FindStringSubmatch(p.Body)[1]
		if p.Header.Get("Cache-Control") != "no-store" {
			t.Fatal("the page with a secret may be cached")
		}
		p.contains(t, "only time it is shown", `data-copy="new-secret"`)
		if r := s.Do(t, "GET", "/v1/models", secret, nil); r.Status != 200 {
			t.Fatalf("the new key does not work: %d", r.Status)
		}

		list := b.get("/console/keys")
		list.contains(t, "production server", secret[:11]+"…", "active")
		list.lacks(t, secret) // never shown again
		testkit.Eventually(t, 10*time.Second, "the key's last-used time shown", func() bool {
			return !strings.Contains(b.get("/console/keys").Body, `<td class="when">—</td>`)
		})

		// A name too long is refused next to the field and kept.
		long := strings.Repeat("n", 61)
		if p := b.post("/console/keys", "/console/keys", url.Values{"name": {long}}); p.Status != 422 || !strings.Contains(p.Body, `value="`+long+`"`) {
			t.Fatalf("long name: %d", p.Status)
		}

		// Revoke asks first, then stops the key at once — although this instance caches keys for an hour.
		var k models.APIKey
		s.DB.R.Where("prefix = ?", secret[:11]).Take(&k)
		b.get("/console/keys/"+itoa(int(k.ID))+"/revoke").contains(t, "Revoke production server?", "cannot be undone")
		p = b.post("/console/keys/"+itoa(int(k.ID))+"/revoke", "/console/keys/"+itoa(int(k.ID))+"/revoke", url.Values{})
		if p.Status != 303 || !strings.Contains(p.location(), "key-revoked") {
			t.Fatalf("revoke: %d %s", p.Status, p.location())
		}
		if r := s.Do(t, "GET", "/v1/models", secret, nil); r.Status != 401 {
			t.Fatalf("a revoked key still works on the instance that revoked it: %d", r.Status)
		}
		// The page says when and by whom.
		if !regexp.MustCompile(`<span class="badge failed">revoked</span> <span class="sub">[0-9-]+ [0-9:]+ UTC by ` + regexp.QuoteMeta("kai@example.com") + `</span>`).MatchString(b.get("/console/keys").Body) {
			t.Errorf("the keys page does not say when and by whom the key was revoked")
		}

		// Another account's key cannot be revoked through this one's console.
		other := signUpVerified(t, s, "other@example.com")
		theirs := createKey(t, other, "theirs")
		var tk models.APIKey
		s.DB.R.Where("prefix = ?", theirs[:11]).Take(&tk)
		if p := b.post("/console/keys", "/console/keys/"+itoa(int(tk.ID))+"/revoke", url.Values{}); p.Status != 404 {
			t.Fatalf("revoking another account's key: %d", p.Status)
		}
		if r := s.Do(t, "GET", "/v1/models", theirs, nil); r.Status != 200 {
			t.Fatal("another account's key was revoked")
		}
	})
}

func TestTasksPages(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "tom@example.com")
		addFunds(t, b, "100")
		key := createKey(t, b, "tasks")
		// A prompt longer than the task list shows, with a two-byte character where it is cut.
		long := "a calm sea at dawn, gulls wheel over the fishing boats of Ålesund while the fog lifts"
		ok := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": long, "aspect_ratio": "1:1"})["id"].(string)
		bad := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-fast-480p", "prompt": "a storm [sim:fail]"})["id"].(string)
		s.WaitStatus(t, key, ok, 20*time.Second, "completed")
		s.WaitStatus(t, key, bad, 20*time.Second, "failed")

		all := b.get("/console/tasks")
		all.contains(t, ok, bad, "640x640", "settled", "released", "$0.20", "$0.40")
		// Tasks are told apart by their prompts: a long one is cut to 60 characters, whole on hover.
		preview := string([]rune(long)[:59]) + "…"
		if !strings.HasSuffix(preview, "Å…") {
			t.Fatalf("the test's prompt is not cut where meant: %q", preview)
		}
		all.contains(t, `<td class="prompt" data-label="Prompt" data-fit="what" title="`+long+`">`+preview+`</td>`, `<td class="prompt" data-label="Prompt" data-fit="what">a storm [sim:fail]</td>`)
		// The finished video shows its thumbnail; the failed one has none.
		thumbSrc := `src="/console/tasks/` + ok + `/video?variant=thumbnail"`
		all.contains(t, thumbSrc)
		if n := strings.Count(all.Body, `/video?variant=thumbnail"`); n != 1 {
			t.Fatalf("the task list shows %d thumbnails, want the completed task's only", n)
		}
		if th := b.get("/console/tasks/" + ok + "/video?variant=thumbnail"); th.Status != 200 || th.Header.Get("Content-Type") != "image/jpeg" || !strings.HasPrefix(th.Body, "\xff\xd8") {
			t.Fatalf("the list's thumbnail: %d %q", th.Status, th.Header.Get("Content-Type"))
		}
		if th := b.get("/console/tasks/" + bad + "/video?variant=thumbnail"); th.Status != 409 {
			t.Fatalf("a failed task's thumbnail: %d", th.Status)
		}
		completed := b.get("/console/tasks?status=completed")
		completed.contains(t, ok)
		completed.lacks(t, bad)
		fast := b.get("/console/tasks?model=videogen-2.0-fast-480p")
		fast.contains(t, bad)
		fast.lacks(t, ok)
		b.get("/console/tasks?status=queued").contains(t, "No videos match these filters")

		// The task's page: parameters, the task log, its ledger entries and the playable video.
		p := b.get("/console/tasks/" + ok)
		// queued → in_progress → completed, or queued → completed when one poll saw the end (a slow run).
		p.contains(t, long, "640x640 (1:1)", " → completed", "created; $0.20 reserved",
			"sent to the generation service (attempt 1)", "accepted by the generation service",
			"Reserved for a video", "Charged for a video", `<video controls`, "/console/tasks/"+ok+"/video", "Download MP4",
			`poster="/console/tasks/`+ok+`/video?variant=thumbnail"`, `/console/tasks/`+ok+`/video?variant=spritesheet`)
		p.lacks(t, "idempotency key", "simtask_", "worker ") // the upstream's details are for support staff
		// Each step once: a task is handled by one worker at a time.
		if n := strings.Count(string(p.Body), "→ completed"); n != 1 || strings.Contains(string(p.Body), "after the task had ended") {
			t.Errorf("the task log records the completion %d times (or a late one): one worker must handle a task at a time", n)
		}
		video := b.get("/console/tasks/" + ok + "/video")
		if video.Status != 200 || video.Header.Get("Content-Type") != "video/mp4" || !strings.HasPrefix(video.Header.Get("Content-Disposition"), "inline") || len(video.Body) < 1000 {
			t.Fatalf("inline video: %d %q %q", video.Status, video.Header.Get("Content-Type"), video.Header.Get("Content-Disposition"))
		}
		if d := b.get("/console/tasks/" + ok + "/video?download=1"); !strings.HasPrefix(d.Header.Get("Content-Disposition"), "attachment") {
			t.Fatal("download is not an attachment")
		}
		// The player's range requests are answered with 206 and exactly those bytes.
		req, _ := http.NewRequest("GET", s.URL+"/console/tasks/"+ok+"/video", nil)
		req.Header.Set("Range", "bytes=100-199")
		part := b.do(req)
		if part.Status != 206 || part.Body != video.Body[100:200] || part.Header.Get("Content-Range") != fmt.Sprintf("bytes 100-199/%d", len(video.Body)) {
			t.Fatalf("range: %d %q, %d bytes", part.Status, part.Header.Get("Content-Range"), len(part.Body))
		}
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", len(video.Body)+10))
		if p := b.do(req); p.Status != 416 {
			t.Fatalf("range past the end: %d", p.Status)
		}
		failed := b.get("/console/tasks/" + bad)
		failed.contains(t, "Failed:", "Refunded (video failed)", "error code generation_failed")
		if n := strings.Count(failed.Body, "Your reservation was released."); n != 1 {
			t.Errorf("the failed task's page says %d times that the reservation was released, want once", n)
		}

		// Another account sees none of it.
		stranger := signUpVerified(t, s, "stranger@example.com")
		if p := stranger.get("/console/tasks/" + ok); p.Status != 404 {
			t.Fatalf("another account's task page: %d", p.Status)
		}
		if p := stranger.get("/console/tasks/" + ok + "/video"); p.Status != 404 {
			t.Fatalf("another account's video: %d", p.Status)
		}
		if p := newBrowser(t, s).get("/console/tasks/" + ok + "/video"); p.Status != 303 {
			t.Fatalf("the video without a session: %d", p.Status)
		}
	})
}

func TestTasksPagination(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1", "MAX_QUEUED_PER_ACCOUNT": "100"})
		b := signUpVerified(t, s, "pat@example.com")
		addFunds(t, b, "100")
		key := createKey(t, b, "pages")
		var ids []string
		for i := 0; i < 27; i++ {
			ids = append(ids, s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("p%d", i)})["id"].(string))
		}
		first := b.get("/console/tasks")
		first.contains(t, ids[26], ids[2])
		first.lacks(t, ids[1])
		next := regexp.MustCompile(`href="(/console/tasks\?after=[^"]+)">Older`).FindStringSubmatch(first.Body)
		if next == nil {
			t.Fatal("no link to older tasks")
		}
		second := b.get(html.UnescapeString(next[1]))
		second.contains(t, ids[1], ids[0], "Newest")
		second.lacks(t, ids[2])
	})
}

func TestCallLogPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "cal@example.com")
		addFunds(t, b, "10")
		k1, k2 := createKey(t, b, "one"), createKey(t, b, "two")
		for i := 0; i < 52; i++ {
			s.Do(t, "GET", "/v1/models", k1, nil)
		}
		s.Do(t, "POST", "/v1/videos", k2, `{"model":`)                      // 400
		s.Do(t, "GET", "/v1/videos/video_missing0000000000000000", k2, nil) // 404
		created := s.CreateVideo(t, k2, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "logged"})
		waitRows(t, s, 55)

		// Times in the viewer's time zone.
		u, _ := url.Parse(s.URL)
		b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "vg_tz", Value: "Asia%2FTokyo"}})
		page := b.get("/console/calls")
		page.contains(t, "Times are in Asia/Tokyo", " JST", "/v1/models")
		page.lacks(t, " UTC<")
		older := regexp.MustCompile(`href="(/console/calls\?[^"]*after=[^"]+)">Older`).FindStringSubmatch(page.Body)
		if older == nil {
			t.Fatal("no second page for 55 calls")
		}
		b.get(html.UnescapeString(older[1])).contains(t, "Newest")

		errs := b.get("/console/calls?class=4xx")
		errs.contains(t, "invalid_json", "not_found")
		errs.lacks(t, "GET /v1/models")
		byKey := b.get("/console/calls?key=" + url.QueryEscape(k2[:11]))
		byKey.contains(t, created["id"].(string), "$0.20")
		byKey.lacks(t, "GET /v1/models")
		b.get("/console/calls?path="+url.QueryEscape("videos/video_missing")).contains(t, "not_found")
		future := time.Now().Add(48 * time.Hour).Format("2006-01-02T15:04")
		b.get("/console/calls?from="+future).contains(t, "No calls match")
		b.get("/console/calls?from=yesterday").contains(t, "From is not a date and time")

		// The CSV export covers the whole filtered range (more than one page), streamed.
		csvPage := b.get("/console/calls.csv?key=" + url.QueryEscape(k1[:11]))
		if csvPage.Status != 200 || !strings.HasPrefix(csvPage.Header.Get("Content-Type"), "text/csv") {
			t.Fatalf("csv: %d %s", csvPage.Status, csvPage.Header.Get("Content-Type"))
		}
		rows, err := csv.NewReader(strings.NewReader(csvPage.Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 53 || rows[0][0] != "time" || rows[1][3] != "/v1/models" || !strings.HasSuffix(rows[1][0], "+09:00") {
			t.Fatalf("csv has %d rows (want header + 52); first %v", len(rows), rows[:min(2, len(rows))])
		}
		// Another account's calls are not there.
		other := signUpVerified(t, s, "nobody@example.com")
		other.get("/console/calls").contains(t, "No calls match")
	})
}

func waitRows(t *testing.T, s *testkit.Server, n int64) {
	t.Helper()
	var got int64
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d call-log rows", n), func() bool {
		s.DB.R.Model(&models.CallLog{}).Count(&got)
		return got >= n
	}, func() string { return fmt.Sprintf("%d rows", got) })
}

func TestWalletPage(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "wes@example.com")
		b.get("/console/wallet").contains(t, "No entries yet", "Add test funds")
		for _, bad := range []string{"0.50", "1001", "ten", "-5"} {
			if p := b.submit("/console/wallet", "amount", url.Values{"amount": {bad}}); p.Status != 422 || !strings.Contains(p.Body, `value="`+bad+`"`) ||
				!strings.Contains(p.Body, `id="amount-error"`) {
				t.Fatalf("amount %q: %d", bad, p.Status)
			}
		}
		addFunds(t, b, "12.50")
		key := createKey(t, b, "w")
		id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "w"})["id"].(string)
		s.WaitStatus(t, key, id, 20*time.Second, "completed")
		p := b.get("/console/wallet")
		// Every entry with the balance after it: +12.50 → 12.50; reserve −0.20 → 12.30 (+0.20); settle → 12.30.
		p.contains(t, "Test funds", "+$12.50", "Reserved for a video", "−$0.20", "Charged for a video", "$12.30", id)
		var e models.LedgerEntry
		s.DB.R.Where("kind = ?", models.KindTestTopup).Take(&e)
		if e.DeltaAvailable != 12_500_000 || !strings.HasPrefix(e.Actor, "user:") {
			t.Fatalf("test top-up entry %+v", e)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestNoTestFundsWithoutTestTopups: the form and its route exist only with TEST_TOPUPS=1.
func TestNoTestFundsWithoutTestTopups(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := signUpVerified(t, s, "nofunds@example.com")
	p := b.get("/console/wallet")
	p.lacks(t, "Add test funds")
	p.contains(t, "Card payments are not available")
	if p := b.post("/console/wallet", "/console/wallet", url.Values{"amount": {"10"}}); p.Status != 404 {
		t.Fatalf("test funds without TEST_TOPUPS: %d", p.Status)
	}
}

func TestPricingPage(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	p := newBrowser(t, s).get("/pricing")
	p.contains(t, "videogen-2.0-480p", "videogen-2.0-fast-1080p", "videogen-2.0-mini-720p", "$0.15", "$0.45", "$0.05", "$10.50", "2206x946", "1080x1920", "640x640")
	if n := strings.Count(p.Body, "<code>videogen-2.0-"); n != 16 {
		t.Fatalf("%d model rows, want 8 in each of the two tables", n)
	}
	// The page reads the table the API bills from.
	s.DB.W.Exec("UPDATE prices SET micros_per_second = 123000 WHERE model = 'videogen-2.0-480p'")
	s.Videos.Prices.Invalidate()
	newBrowser(t, s).get("/pricing").contains(t, "$0.123")
}

// TestEveryPageIsWellFormed visits every page, signed out and in: each has a title, one heading,
// labelled fields, the legal links in its footer and the security headers.
func TestEveryPageIsWellFormed(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"TEST_TOPUPS": "1"})
	anon := newBrowser(t, s)
	b := signUpVerified(t, s, "a11y@example.com")
	addFunds(t, b, "5")
	key := createKey(t, b, "a11y")
	id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a11y"})["id"].(string)
	var k models.APIKey
	s.DB.R.Take(&k)
	pages := map[*browser][]string{
		anon: {"/", "/pricing", "/terms", "/privacy", "/signup", "/signin", "/password/forgot", "/password/reset?token=x", "/verify?token=x", "/no-such-page"},
		b: {"/console", "/console/keys", "/console/keys/" + itoa(int(k.ID)) + "/revoke", "/console/keys/" + itoa(int(k.ID)) + "/limits", "/console/tasks", "/console/tasks/" + id,
			"/console/calls", "/console/wallet", "/console/account", "/pricing"},
	}
	for who, paths := range pages {
		for _, path := range paths {
			p := who.get(path)
			checkPage(t, path, p)
		}
	}
	if css := anon.get("/static/app.css"); !strings.Contains(css.Body, ":focus-visible") {
		t.Error("the stylesheet gives no visible focus")
	}
}

func attrOf(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func checkPage(t *testing.T, path string, p *page) {
	t.Helper()
	csp := p.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") ||
		p.Header.Get("X-Frame-Options") != "DENY" || p.Header.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("%s: security headers %q / %q / %q", path, csp, p.Header.Get("X-Frame-Options"), p.Header.Get("Referrer-Policy"))
	}
	doc, err := html.Parse(strings.NewReader(p.Body))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var title string
	var h1s int
	labels := map[string]bool{}
	var inputs []string
	links := map[string]bool{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attr := func(k string) string {
				for _, a := range n.Attr {
					if a.Key == k {
						return a.Val
					}
				}
				return ""
			}
			switch n.Data {
			case "title":
				if n.FirstChild != nil {
					title = n.FirstChild.Data
				}
			case "h1":
				h1s++
			case "label":
				labels[attr("for")] = true
			case "input", "select", "textarea":
				if typ := attr("type"); typ != "hidden" && typ != "submit" {
					inputs = append(inputs, attr("id"))
				}
			case "a":
				links[attr("href")] = true
			case "table":
				// Wide tables scroll inside their own box, never the page (on a phone most of them are wider).
				if p := n.Parent; p == nil || p.Data != "div" || !slices.Contains(strings.Fields(attrOf(p, "class")), "table-wrap") {
					t.Errorf("%s: a table outside a .table-wrap box", path)
				}
			case "script":
				if attr("src") == "" {
					t.Errorf("%s: an inline script", path)
				}
			}
			if attr("style") != "" {
				t.Errorf("%s: an inline style on <%s> (the CSP forbids it)", path, n.Data)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if strings.TrimSpace(title) == "" || h1s != 1 {
		t.Errorf("%s: title %q, %d h1 elements", path, title, h1s)
	}
	for _, id := range inputs {
		if id == "" || !labels[id] {
			t.Errorf("%s: field %q has no label", path, id)
		}
	}
	if !links["/terms"] || !links["/privacy"] {
		t.Errorf("%s: footer lacks the terms or privacy links", path)
	}
}

// TestRevokeReachesOtherInstances: a key revoked in one instance's console is refused at once there, and
// within API_KEY_CACHE_TTL by another instance that had it cached.
func TestRevokeReachesOtherInstances(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1", "API_KEY_CACHE_TTL": "1s"}
		one := testkit.Start(t, dbURL, env)
		two := testkit.Start(t, dbURL, env)
		b := signUpVerified(t, one, "multi@example.com")
		key := createKey(t, b, "shared")
		if r := two.Do(t, "GET", "/v1/models", key, nil); r.Status != 200 { // now cached on instance two
			t.Fatalf("key refused before revocation: %d", r.Status)
		}
		var k models.APIKey
		one.DB.R.Where("prefix = ?", key[:11]).Take(&k)
		b.post("/console/keys", "/console/keys/"+itoa(int(k.ID))+"/revoke", url.Values{})
		if r := one.Do(t, "GET", "/v1/models", key, nil); r.Status != 401 {
			t.Fatalf("instance one still accepts the key it revoked: %d", r.Status)
		}
		testkit.Eventually(t, 3*time.Second, "instance two refuses the revoked key once its 1 s cache forgets it", func() bool {
			return two.Do(t, "GET", "/v1/models", key, nil).Status == 401
		})
	})
}

// TestBrowserTimeZoneCookie: the zone app.js reports (URL-encoded, as browsers write it) is used.
func TestBrowserTimeZoneCookie(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	b := signUpVerified(t, s, "tz@example.com")
	u, _ := url.Parse(s.URL)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: "vg_tz", Value: "Asia%2FTokyo"}})
	p := b.get("/console/calls")
	p.contains(t, "Times are in Asia/Tokyo")
	if p.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("a console page may be cached: %q", p.Header.Get("Cache-Control"))
	}
	// A zone chosen on the account page wins over the browser's.
	b.submit("/console/account", "tz", url.Values{"tz": {"Europe/Paris"}})
	b.get("/console/calls").contains(t, "Times are in Europe/Paris")
}

// TestConsoleSurvivesHostileInput: bytes PostgreSQL cannot store (NUL, invalid UTF-8) in filters, names
// and headers are refused or cleaned — never a 500.
func TestConsoleSurvivesHostileInput(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "hostile@example.com")
		for _, q := range []string{"path=%00", "path=%ff", "key=%ff", "key=vg_%00", "from=%ff", "class=%00", "after=%ff-%00", "after=1-2-3"} {
			if p := b.get("/console/calls?" + q); p.Status != 200 {
				t.Errorf("/console/calls?%s: %d", q, p.Status)
			}
			if p := b.get("/console/calls.csv?" + q); p.Status != 200 {
				t.Errorf("/console/calls.csv?%s: %d", q, p.Status)
			}
		}
		for _, q := range []string{"status=%00", "model=%ff", "after=%ff"} {
			if p := b.get("/console/tasks?" + q); p.Status >= 500 {
				t.Errorf("/console/tasks?%s: %d", q, p.Status)
			}
		}
		if p := b.get("/console/wallet?before=%ff"); p.Status != 200 {
			t.Errorf("wallet with a bad cursor: %d", p.Status)
		}
		if p := b.post("/console/keys", "/console/keys", url.Values{"name": {"bad\xffname"}}); p.Status != 422 {
			t.Errorf("key name with invalid UTF-8: %d", p.Status)
		}
		other := newBrowser(t, s)
		m := csrfRE.FindStringSubmatch(other.get("/signin").Body)
		req, _ := http.NewRequest("POST", s.URL+"/signin", strings.NewReader(url.Values{"_csrf": {html.UnescapeString(m[1])},
			"email": {"hostile@example.com"}, "password": {"paper-boats-float-42"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("User-Agent", "evil\xff\xfe agent")
		if p := other.do(req); p.Status != 303 {
			t.Errorf("sign-in with a non-UTF-8 User-Agent: %d", p.Status)
		}
		if p := newBrowser(t, s).post("/signin", "/signin", url.Values{"email": {"a\x00b@example.com"}, "password": {"x"}}); p.Status != 401 {
			t.Errorf("sign-in with a NUL in the address: %d", p.Status)
		}
	})
}

// TestCallLogExportAndPagesAreComplete: with many rows at the very same instant, the pages and the
// batched export each list every row exactly once.
func TestCallLogExportAndPagesAreComplete(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "bulk@example.com")
		var u models.User
		s.DB.R.Where("email = ?", "bulk@example.com").Take(&u)
		at := time.Now().UTC().Truncate(time.Microsecond)
		rows := make([]models.CallLog, 2500)
		for i := range rows {
			acct := u.AccountID
			rows[i] = models.CallLog{At: at, RequestID: fmt.Sprintf("req_bulk%05d", i), AccountID: &acct, Method: "GET", Path: "/v1/models", Status: 200, LatencyMicros: 1}
		}
		if err := s.DB.W.CreateInBatches(rows, 200).Error; err != nil {
			t.Fatal(err)
		}
		// Streamed: sent in chunks as rows are read, never built whole first (no Content-Length).
		resp, err := b.c.Get(s.URL + "/console/calls.csv")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.ContentLength != -1 || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Fatalf("the export is not streamed: Content-Length %d, Transfer-Encoding %v", resp.ContentLength, resp.TransferEncoding)
		}
		csvPage := b.get("/console/calls.csv")
		records, err := csv.NewReader(strings.NewReader(csvPage.Body)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, r := range records[1:] {
			if seen[r[1]] {
				t.Fatalf("row %s exported twice", r[1])
			}
			seen[r[1]] = true
		}
		if len(seen) != 2500 {
			t.Fatalf("exported %d of 2500 rows", len(seen))
		}
		// The same through the pages of 50: nothing skipped, nothing repeated.
		pageSeen := map[string]bool{}
		next := "/console/calls"
		for next != "" {
			p := b.get(next)
			onPage := map[string]bool{} // a row names its request id several times (link, title, copy button)
			for _, m := range regexp.MustCompile(`req_bulk[0-9]{5}`).FindAllString(p.Body, -1) {
				onPage[m] = true
			}
			for m := range onPage {
				if pageSeen[m] {
					t.Fatalf("row %s on two pages", m)
				}
				pageSeen[m] = true
			}
			next = ""
			if m := regexp.MustCompile(`href="(/console/calls\?[^"]*after=[^"]+)">Older`).FindStringSubmatch(p.Body); m != nil {
				next = html.UnescapeString(m[1])
			}
		}
		if len(pageSeen) != 2500 {
			t.Fatalf("the pages listed %d of 2500 rows", len(pageSeen))
		}
	})
}

// TestUnreadableInputsFailSayingWhatHappenedToTheMoney: every failure the worker stores says what became
// of the reservation, so the console shows it once — here the one for a task whose stored inputs cannot
// be read.
func TestUnreadableInputsFailSayingWhatHappenedToTheMoney(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		front := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, front, "inputs@example.com")
		addFunds(t, b, "5")
		key := createKey(t, b, "inputs")
		id := front.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "unreadable"})["id"].(string)
		if err := front.DB.W.Exec("UPDATE tasks SET inputs = 'not json' WHERE id = ?", id).Error; err != nil {
			t.Fatal(err)
		}
		testkit.Start(t, dbURL, nil) // an instance with a worker takes the task
		front.WaitStatus(t, key, id, 20*time.Second, "failed")

		p := b.get("/console/tasks/" + id)
		p.contains(t, "The task's stored inputs could not be read.", "error code internal_error", "Refunded (video failed)")
		if n := strings.Count(p.Body, "Your reservation was released."); n != 1 {
			t.Errorf("the page says %d times that the reservation was released, want once", n)
		}
		testkit.CheckLedger(t, front.DB)
	})
}

// TestConsoleFormsAnswerAtTheirPageURL: every console form posts to its own page's URL, so a refused one is
// shown again (422, the error beside its field, what was typed kept) at the address it came from, and a
// reload or a bookmark finds the page; an accepted one redirects back to it with a notice.
func TestConsoleFormsAnswerAtTheirPageURL(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "forms@example.com")
		createKey(t, b, "to revoke")
		var k models.APIKey
		s.DB.R.Take(&k)
		revoke := "/console/keys/" + itoa(int(k.ID)) + "/revoke"
		for _, tc := range []struct {
			name, page, field string
			values            url.Values
			status            int
			want              []string // on the refused page, or in the redirect's Location
		}{
			{"test funds refused", "/console/wallet", "amount", url.Values{"amount": {"ten"}}, 422, []string{`id="amount-error"`, `value="ten"`}},
			{"test funds added", "/console/wallet", "amount", url.Values{"amount": {"10"}}, 303, []string{"/console/wallet?notice=funds-added"}},
			{"unknown time zone", "/console/account", "tz", url.Values{"tz": {"Mars/Olympus"}}, 422, []string{`id="tz-error"`, "Choose a time zone from the list"}},
			{"time zone saved", "/console/account", "tz", url.Values{"tz": {"Asia/Tokyo"}}, 303, []string{"/console/account?notice=timezone-saved"}},
			{"wrong current password", "/console/account", "current", url.Values{"current": {"not-my-password"}, "password": {"new-kites-fly-high-7"}}, 422, []string{`id="current-error"`}},
			{"weak new password", "/console/account", "current", url.Values{"current": {"paper-boats-float-42"}, "password": {"short"}}, 422, []string{`id="password-error"`, "at least 10 characters"}},
			{"key name too long", "/console/keys", "name", url.Values{"name": {strings.Repeat("n", 61)}}, 422, []string{`id="name-error"`, `value="` + strings.Repeat("n", 61) + `"`}},
			{"key revoked", revoke, "", url.Values{}, 303, []string{"/console/keys?notice=key-revoked"}},
		} {
			p := b.submit(tc.page, tc.field, tc.values)
			if p.Posted != tc.page || p.Status != tc.status {
				t.Errorf("%s: the form on %s posted to %s and got %d, want %d at the page's own URL", tc.name, tc.page, p.Posted, p.Status, tc.status)
				continue
			}
			for _, w := range tc.want {
				if tc.status == 303 && p.location() != w {
					t.Errorf("%s: redirected to %q, want %q", tc.name, p.location(), w)
				} else if tc.status != 303 && !strings.Contains(p.Body, w) {
					t.Errorf("%s: the page lacks %s:\n%s", tc.name, w, trimPage(p.Body))
				}
			}
		}
		var u models.User
		s.DB.R.Where("email = ?", "forms@example.com").Take(&u)
		if u.TimeZone != "Asia/Tokyo" {
			t.Errorf("time zone %q after an unknown one was refused and Asia/Tokyo saved", u.TimeZone)
		}
	})
}
