package main_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// ledgerCheck runs `videogen ledger check args...` (GORACE as in reconcile: no second of sleep at exit).
func ledgerCheck(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	env = maps.Clone(env)
	env["GORACE"] = "atexit_sleep_ms=0"
	return run(t, dir, env, append([]string{"ledger", "check"}, args...)...)
}

// TestLedgerCheck corrupts one account's balance directly in the database, and the ledger self-check
// reports exactly that account everywhere: `videogen ledger check` (exit 1, one line per problem, all of
// that account, the check recorded), the server's background check (a ledger_checks row of its own, an
// error in its log) and /metrics. A finished task whose reservation is resolved a second time is
// reported as its account's. Without drift the command exits 0; without an answer, 2.
func TestLedgerCheck(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		metricsAddr := testkit.FreeAddr(t)
		owner := "ledger-test-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
		env := map[string]string{"DATABASE_URL": dbURL, "SIM_DURATION": "100ms", "POLL_INTERVAL_MIN": "10ms", "POLL_INTERVAL_MAX": "100ms",
			"LEDGER_CHECK_INTERVAL": "1s", "METRICS_ADDR": metricsAddr, "WORKER_ID": owner}
		p := serve(t, dir, env)
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		drifted, steady := testkit.NewAccount(t, d, "10"), testkit.NewAccount(t, d, "10")
		r := testkit.Do(t, p.url, "POST", "/v1/videos", steady.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a steady hand"})
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		taskID := r.JSON(t)["id"].(string)
		testkit.Eventually(t, 30*time.Second, "the task completes", func() bool { return testkit.Task(t, d, taskID).Status == "completed" })

		out, stderr, code := ledgerCheck(t, dir, env)
		if code != 0 || !strings.Contains(out, "no drift") {
			t.Fatalf("a sound ledger: exit %d\n%s%s", code, out, stderr)
		}

		// One account's available balance is changed behind the ledger's back.
		if err := d.W.Exec("UPDATE accounts SET available_micros = available_micros + 1 WHERE id = ?", drifted.ID).Error; err != nil {
			t.Fatal(err)
		}
		out, stderr, code = ledgerCheck(t, dir, env)
		if code != 1 || !strings.Contains(stderr, "ledger drift") {
			t.Fatalf("a drifted account: exit %d, want 1\n%s%s", code, out, stderr)
		}
		reportsOnly(t, out, drifted.ID, fmt.Sprintf("account %d: ", drifted.ID))
		var cli models.LedgerCheck
		if err := d.R.Where("owner LIKE ?", "cli%").Order("id DESC").Take(&cli).Error; err != nil {
			t.Fatalf("the command recorded no check: %v", err)
		}
		if cli.Accounts != strconv.FormatInt(drifted.ID, 10) || cli.Problems < 1 || !strings.Contains(cli.Detail, fmt.Sprintf("account %d", drifted.ID)) {
			t.Errorf("the command's check: %+v", cli)
		}

		// The server's own check, on its interval.
		// The check records its row, then logs: wait for both.
		var bg models.LedgerCheck
		logLine := regexp.MustCompile(`level=ERROR msg="ledger drift" .*account=` + strconv.FormatInt(drifted.ID, 10) + `\b`)
		testkit.Eventually(t, 30*time.Second, fmt.Sprintf("the server's check records the drift, and logs an error naming account %d", drifted.ID), func() bool {
			return d.R.Where("owner = ? AND problems > 0", owner).Order("id DESC").Take(&bg).Error == nil && logLine.MatchString(p.stderr.String())
		}, func() string { return p.stderr.String() })
		if bg.Accounts != strconv.FormatInt(drifted.ID, 10) {
			t.Errorf("the server's check names accounts %q, want %d only", bg.Accounts, drifted.ID)
		}
		for _, line := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(line, `msg="ledger drift"`) && !strings.Contains(line, fmt.Sprintf("account=%d ", drifted.ID)) && !strings.HasSuffix(line, fmt.Sprintf("account=%d", drifted.ID)) {
				t.Errorf("the log names drift elsewhere: %s", line)
			}
		}
		m := testkit.Scrape(t, "http://"+metricsAddr+"/metrics")
		if v, ok := m.Value("videogen_ledger_drift_accounts"); !ok || v != 1 {
			t.Errorf("videogen_ledger_drift_accounts = %v (found %v), want 1", v, ok)
		}
		if v, ok := m.Value("videogen_ledger_drift_found_total"); !ok || v < 1 {
			t.Errorf("videogen_ledger_drift_found_total = %v (found %v), want at least 1", v, ok)
		}
		if v, ok := m.Value("videogen_ledger_check_problems"); !ok || v < 1 {
			t.Errorf("videogen_ledger_check_problems = %v (found %v)", v, ok)
		}

		// Put right, then a completed task's reservation is resolved a second time: a release beside its
		// settle, moving nothing, so every balance still equals its entries.
		if err := d.W.Exec("UPDATE accounts SET available_micros = available_micros - 1 WHERE id = ?", drifted.ID).Error; err != nil {
			t.Fatal(err)
		}
		var acct models.Account
		if err := d.R.Take(&acct, steady.ID).Error; err != nil {
			t.Fatal(err)
		}
		second := models.LedgerEntry{AccountID: steady.ID, Kind: models.KindRelease, TaskID: &taskID,
			AvailableAfter: acct.AvailableMicros, ReservedAfter: acct.ReservedMicros, CreatedAt: time.Now().UTC()}
		if err := d.W.Create(&second).Error; err != nil {
			t.Fatal(err)
		}
		out, stderr, code = ledgerCheck(t, dir, env)
		if code != 1 {
			t.Fatalf("a reservation resolved twice: exit %d, want 1\n%s%s", code, out, stderr)
		}
		reportsOnly(t, out, steady.ID, "task "+taskID+": ")
		// Put right again: the test leaves a sound ledger, as every test must.
		if err := d.W.Delete(&second).Error; err != nil {
			t.Fatal(err)
		}
		testkit.CheckLedger(t, d)

		// No answer: exit 2.
		if _, stderr, code := ledgerCheck(t, dir, env, "now"); code != 2 || !strings.Contains(stderr, "ledger check --help") {
			t.Errorf("an argument: exit %d %q, want 2", code, stderr)
		}
		unreachable := maps.Clone(env)
		unreachable["DATABASE_URL"] = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
		if _, stderr, code := ledgerCheck(t, dir, unreachable); code != 2 {
			t.Errorf("an unreachable database: exit %d %q, want 2", code, stderr)
		}
	})
}

// reportsOnly fails unless every problem line of the command's output starts with prefix and its last
// line names exactly account id.
func reportsOnly(t *testing.T, out string, id int64, prefix string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("no problem listed:\n%s", out)
	}
	for _, line := range lines[:len(lines)-1] {
		if !strings.HasPrefix(line, prefix) {
			t.Errorf("a problem not about %q: %s", prefix, line)
		}
	}
	if want := fmt.Sprintf("drift in 1 account(s): %d ", id); !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("last line %q, want it to start %q", lines[len(lines)-1], want)
	}
}
