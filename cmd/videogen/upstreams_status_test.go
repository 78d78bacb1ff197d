package main_test

import (
	"encoding/json"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream/status"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// upstreamsStatus runs `videogen upstreams status args...` (GORACE as in ledger check).
func upstreamsStatus(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	env = maps.Clone(env)
	env["GORACE"] = "atexit_sleep_ms=0"
	return run(t, dir, env, append([]string{"upstreams", "status"}, args...)...)
}

// TestUpstreamsStatus prints internal/domain/upstream/status's rows as the operator sees them: one line per
// credential with its state, worst breaker, load, calls and errors, latency and last error on one line
// (a newline in the error does not break the table), the refused key's reason below; --json the rows
// themselves. Bad usage exits 2.
func TestUpstreamsStatus(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL}
		d := testkit.OpenDB(t, dbURL)
		now := db.Now()
		for _, c := range []models.UpstreamCredential{
			{ID: "ark-main", Provider: "ark", Label: "main", MaxConcurrency: 8, InFlight: 3, Enabled: true},
			{ID: "openai-backup", Provider: "openai", Label: "backup", MaxConcurrency: 2, Enabled: true,
				AuthError: ptr("401 invalid_api_key"), AuthErrorAt: ptr(now.Add(-10 * time.Minute))},
			{ID: "sim-old", Provider: "sim", Label: "old", MaxConcurrency: 4},
		} {
			c.CreatedAt, c.UpdatedAt = now, now
			if err := d.W.Create(&c).Error; err != nil {
				t.Fatal(err)
			}
		}
		for _, h := range []models.UpstreamHealth{
			{CredentialID: "ark-main", Instance: "web-1", Breaker: "closed", Calls: 100, Errors: 5, P50Ms: 800, P95Ms: 2000, P99Ms: 4000,
				LastError: "upstream 503", LastErrorAt: ptr(now.Add(-3 * time.Minute)), UpdatedAt: now},
			{CredentialID: "ark-main", Instance: "web-2", Breaker: "half-open", Calls: 60, Errors: 20, P50Ms: 900, P95Ms: 1800, P99Ms: 5000,
				LastError: "poll: timeout\nafter 30s", LastErrorAt: ptr(now.Add(-2 * time.Minute)), UpdatedAt: now},
			{CredentialID: "ark-main", Instance: "web-3", Breaker: "open", Calls: 1000, UpdatedAt: now.Add(-time.Hour)},
		} {
			if err := d.W.Create(&h).Error; err != nil {
				t.Fatal(err)
			}
		}

		out, stderr, code := upstreamsStatus(t, dir, env)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		words := regexp.MustCompile(` +`).ReplaceAllString(out, " ")
		for _, want := range []string{
			"ID NAME KIND STATE BREAKER IN FLIGHT CALLS ERRORS P50/P95/P99 MS LAST ERROR\n",
			"\nopenai-backup backup openai unhealthy: the provider refused the key unknown 0/2 0 0 – –\n",
			"\nark-main main ark in service half-open 3/8 160 25 (15.6%) 900/2000/5000 2m ago: poll: timeout after 30s\n",
			"\nsim-old old sim not taking new tasks (removed or draining) unknown 0/4 0 0 – –\n",
			// The hint names the binary as it was run (here the test's build), so it can be pasted back.
			"\nopenai-backup: the provider refused the key 10m ago: 401 invalid_api_key (fix the key, then run " + bin + " upstreams reload)\n",
		} {
			if !strings.Contains(words, want) {
				t.Errorf("no line %q in:\n%s", want, out)
			}
		}

		out, stderr, code = upstreamsStatus(t, dir, env, "--json")
		var rows []status.Row
		if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 3 {
			t.Fatalf("--json: exit %d %v\n%s%s", code, err, out, stderr)
		}
		if r := rows[1]; r.ID != "ark-main" || r.Calls != 160 || r.Breaker != "half-open" || r.Instances != 2 || r.LastError != "poll: timeout\nafter 30s" {
			t.Errorf("--json: %+v", r)
		}

		for _, args := range [][]string{{"now"}, {"--fresh", "0"}, {"--fresh", "soon"}} {
			if out, stderr, code := upstreamsStatus(t, dir, env, args...); code != 2 || out != "" || !strings.Contains(stderr, "upstreams status --help") {
				t.Errorf("%v: exit %d %q %q, want 2", args, code, out, stderr)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }
