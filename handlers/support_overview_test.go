package handlers_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/jobs/ledgercheck"
	"videogen/internal/testkit"
	"videogen/models"
	"videogen/views"
)

// TestSupportOverview: /support is the staff overview — a 404 for a signed-out visitor and for a member
// — and shows, from the platform's own records: helpful empty states on a new platform; then tasks and
// the exact charges of the day (micro-dollars summed from the ledger's settlements), each credential's
// in-flight tasks against its capacity, the last hour's errors per endpoint with ids folded, the queue
// with its oldest task's age; and the ledger self-check, a job of the queue either of two instances
// works, naming exactly the account whose balance was changed behind the ledger's back.
func TestSupportOverview(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "100ms", "LEDGER_CHECK_INTERVAL": "0", "UPSTREAMS_WATCH_INTERVAL": "100ms"})
		if p := newBrowser(t, s).get("/support"); p.Status != 404 || strings.Contains(p.Body, "Platform overview") {
			t.Fatalf("signed out: %d", p.Status)
		}
		member := signUpVerified(t, s, "member@example.com")
		if p := member.get("/support"); p.Status != 404 || strings.Contains(p.Body, "Platform overview") {
			t.Fatalf("a member: %d", p.Status)
		}
		staff := signInStaff(t, s, "ops@example.com", models.RoleSupport)

		p := staff.get("/support")
		if p.Status != 200 {
			t.Fatalf("staff: %d %s", p.Status, trimPage(p.Body))
		}
		p.contains(t, "Platform overview", `action="/support/search"`, `name="q"`,
			"The ledger self-check has not run yet", "Nothing is queued.", "No tasks were created in the last 30 days.",
			"Nothing was charged in the last 30 days", "No API calls in the last hour.",
			"Job queues", "<code>mail</code>", "<code>webhooks</code>", "<code>payments</code>", "<code>chores</code>", "No job is retrying or given up.")
		var creds []models.UpstreamCredential
		s.DB.R.Order("label").Find(&creds)
		if len(creds) != 2 {
			t.Fatalf("%d credentials, want the simulator's 2", len(creds))
		}
		for _, c := range creds {
			p.contains(t, c.Label, c.ID, "0 / 4")
		}

		// Three videos complete and are charged; one poll asks for a video that does not exist.
		acct := s.NewAccount(t, "10")
		for _, prompt := range []string{"a red kite", "a blue kite", "a kite in a storm"} {
			id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": prompt, "seconds": 4})["id"].(string)
			s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed")
		}
		if r := s.Do(t, "GET", "/v1/videos/video_noSuchVideoAtAll0000", acct.Key, nil); r.Status != 404 {
			t.Fatalf("unknown video: %d", r.Status)
		}
		var charged int64
		s.DB.R.Model(&models.LedgerEntry{}).Where("kind = ?", models.KindSettle).Select("COALESCE(SUM(-delta_reserved), 0)").Scan(&charged)
		if charged <= 0 {
			t.Fatal("nothing was charged")
		}
		endpoint := regexp.MustCompile(`<code>GET /v1/videos/\{id\}</code></td><td class="num" data-label="Calls">(\d+)</td><td class="num" data-label="4xx">1</td><td class="num" data-label="5xx" data-fit="status">0</td>`)
		overview := func() string { return trimPage(p.Body) }
		testkit.Eventually(t, 20*time.Second, "the last hour's calls on the overview", func() bool {
			p = staff.get("/support")
			return endpoint.MatchString(p.Body)
		}, overview)
		// Each credential's health as the instance publishes it: its breaker and its latest calls.
		healthy := regexp.MustCompile(`<span class="badge completed">closed</span>\s*</td><td data-label="Errors" class="keep">0 of [1-9]\d* \(0\.0%\)</td><td data-label="Latency" class="keep">\d+ / \d+ / \d+ ms</td>`)
		testkit.Eventually(t, 20*time.Second, "credential health on the overview", func() bool {
			if healthy.MatchString(p.Body) {
				return true
			}
			p = staff.get("/support")
			return false
		}, overview)
		p.contains(t, `<strong id="charged-total">`+views.Money(charged)+`</strong>`, `<code>POST /v1/videos</code></td><td class="num" data-label="Calls">3</td><td class="num" data-label="4xx">0</td><td class="num" data-label="5xx" data-fit="status">0</td><td class="num" data-label="Error rate" data-fit="status">0.0%</td>`)
		p.lacks(t, "video_noSuchVideoAtAll0000")
		if !regexp.MustCompile(`UTC: 3 tasks \(3 completed, 0 failed\)</title>`).MatchString(p.Body) {
			t.Errorf("no bar of the day's 3 tasks:\n%s", trimPage(p.Body))
		}

		// No slot anywhere: a new task waits, and the overview says since when.
		if err := s.DB.W.Model(&models.UpstreamCredential{}).Where("1 = 1").Update("enabled", false).Error; err != nil {
			t.Fatal(err)
		}
		waiting := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "waits"})["id"].(string)
		created := testkit.Task(t, s.DB, waiting).CreatedAt
		p = staff.get("/support")
		p.contains(t, `<div class="label">Waiting for a slot</div><div class="value">1</div>`, `id="oldest-queued"`,
			"created "+created.UTC().Format("2006-01-02 15:04:05 MST"), "not taking new tasks")

		// Another instance joins on the same database (and the same simulated credentials); one account's
		// balance is changed directly in the database, and changed back when the test ends (before either
		// instance's audit, clean-ups running last in, first out). Then a ledger check is queued, as the
		// leader's schedule queues one every LEDGER_CHECK_INTERVAL (off on this instance, the leader), and
		// either instance works it (docs/jobs.md, "Periodic chores").
		testkit.Start(t, dbURL, map[string]string{"DATA_DIR": s.Cfg.DataDir, "WORKERS": "false", "LEDGER_CHECK_INTERVAL": "0"})
		other := s.NewAccount(t, "10")
		if err := s.DB.W.Exec("UPDATE accounts SET available_micros = available_micros + 1 WHERE id = ?", other.ID).Error; err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.DB.W.Exec("UPDATE accounts SET available_micros = available_micros - 1 WHERE id = ?", other.ID).Error; err != nil {
				t.Errorf("undo the drift: %v", err)
			}
		})
		if err := s.Queue.Insert(context.Background(), ledgercheck.Args{}, nil); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the drift on the overview", func() bool {
			p = staff.get("/support")
			return strings.Contains(p.Body, "Ledger drift")
		}, overview)
		links := regexp.MustCompile(`class="drift-account" href="([^"]+)"`).FindAllStringSubmatch(p.Body, -1)
		if len(links) != 1 || links[0][1] != "/support/accounts/"+strconv.FormatInt(other.ID, 10) {
			t.Fatalf("drift links %v, want account %d only", links, other.ID)
		}
		p.contains(t, "account "+strconv.FormatInt(other.ID, 10)+": balances")
	})
}
