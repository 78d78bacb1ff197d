package handlers_test

import (
	"regexp"
	"strings"
	"testing"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestPagesSayWhatTheyMean: the words of the pages are text, not code: no page shows a Go name such as
// "views.Latency" where a column says "Latency", and the test-funds form states its default bounds as
// people write them ("$1", "$1,000").
func TestPagesSayWhatTheyMean(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1"})
	b := signUpVerified(t, s, "words@example.com")
	st := signInStaff(t, s, "words-staff@example.com", models.RoleSupport)
	key := createKey(t, b, "words")
	waitCall(t, s, s.Do(t, "GET", "/v1/models", key, nil).Header.Get("X-Request-Id"))
	calls := b.get("/console/calls")
	calls.contains(t, `<th scope="col">Status</th>`)
	if !regexp.MustCompile(`<span class="badge s2">200</span> <span class="muted small">\d+\.\d ms</span>`).MatchString(calls.Body) {
		t.Errorf("the call log shows no latency beside the status: %s", trimPage(calls.Body))
	}
	b.get("/console/wallet").contains(t, "Between $1 and $1,000.")
	st.get("/support").contains(t, "Latency p50 / p95 / p99")
	for _, path := range []string{"/console", "/console/calls", "/console/wallet", "/console/keys", "/console/tasks", "/console/account", "/pricing", "/"} {
		if p := b.get(path); strings.Contains(p.Body, "views.") || strings.Contains(p.Body, "customer.") {
			t.Errorf("%s shows a Go name: %s", path, trimPage(p.Body))
		}
	}
	for _, path := range []string{"/support", "/support/search"} {
		if p := st.get(path); strings.Contains(p.Body, "views.") || strings.Contains(p.Body, "staff.") {
			t.Errorf("%s shows a Go name: %s", path, trimPage(p.Body))
		}
	}
}
