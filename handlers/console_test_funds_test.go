package handlers_test

import (
	"net/url"
	"strings"
	"testing"

	"videogen/internal/testkit"
)

// TestTestFundsBoundsAreConfigured: TEST_TOPUP_MIN and TEST_TOPUP_MAX bound a test top-up, both ends
// included, and the form says so; the defaults ($1 to $1,000) are TestWalletPage's.
func TestTestFundsBoundsAreConfigured(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1",
		"TEST_TOPUP_MIN": "5", "TEST_TOPUP_MAX": "50"})
	b := signUpVerified(t, s, "bounded@example.com")
	b.get("/console/wallet").contains(t, "Between $5 and $50.")
	for _, bad := range []string{"4.99", "50.01"} {
		p := b.submit("/console/wallet", "amount", url.Values{"amount": {bad}})
		if p.Status != 422 || !strings.Contains(p.Body, "Enter an amount between $5 and $50") {
			t.Fatalf("amount %s: %d", bad, p.Status)
		}
	}
	for _, good := range []string{"5", "50"} {
		if p := b.submit("/console/wallet", "amount", url.Values{"amount": {good}}); p.Status != 303 {
			t.Fatalf("amount %s: %d", good, p.Status)
		}
	}
}
