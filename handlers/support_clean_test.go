package handlers_test

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"videogen/internal/testkit"
	"videogen/models"
)

// currentRE is a link marked as the page's own (the staff navigation's, and the account banner's).
var currentRE = regexp.MustCompile(`<a href="[^"]*" aria-current="page">([^<]+)</a>`)

// currentLinks lists the labels of the links a page marks as its own, each once, in order: the
// navigation's (rendered twice, for wide and narrow screens), then the staff banner's.
func currentLinks(body string) []string {
	var out []string
	for _, m := range currentRE.FindAllStringSubmatch(body, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// TestStaffPagesSayItOnce: the staff pages say each thing once and mark where the staff member is. The
// credit review's headline is its heading only (not again as its first line); an account's pages mark
// Search in the staff navigation (accounts are found there) and their own page in the account's banner,
// and Overview marks the overview only; each row of the audit log names its target once. (The TOTP key,
// printed once, is Test2FAEnrolment's.)
func TestStaffPagesSayItOnce(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "10")
		adm := signInStaff(t, s, "boss@example.com", models.RoleAdmin)
		base := fmt.Sprintf("/support/accounts/%d", acct.ID)
		call := s.Do(t, "GET", "/v1/models", acct.Key, nil).Header.Get("X-Request-Id")
		waitCall(t, s, call)

		review := adm.post(base, base+"/balance", url.Values{"direction": {"credit"}, "amount": {"5"}, "reason": {"Goodwill for a failed video"}})
		headline := fmt.Sprintf("Credit $5.00 to account %d (%s)", acct.ID, acct.Email)
		review.contains(t, "<h1>"+headline+"?</h1>", "Goodwill for a failed video", "$10.00 now, $15.00 after")
		if n := strings.Count(visibleText(review.Body), headline); n != 1 {
			t.Errorf("the credit review states %q %d times, want once (its heading)", headline, n)
		}

		for path, want := range map[string][]string{
			base:                            {"Search", "Account"},
			base + "/tasks":                 {"Search", "Tasks"},
			base + "/calls":                 {"Search", "Call log"},
			base + "/ledger":                {"Search", "Ledger"},
			base + "/webhooks":              {"Search", "Webhooks"},
			"/support/calls/" + call:        {"Search", "Call log"},
			"/support/search?q=example.com": {"Search"},
			"/support":                      {"Overview"},
			"/support/prices":               {"Prices"},
			"/support/audit":                {"Audit log"},
		} {
			p := adm.get(path)
			if got := currentLinks(p.Body); p.Status != 200 || !slices.Equal(got, want) {
				t.Errorf("%s: %d, marks %q as the current page, want %q", path, p.Status, got, want)
			}
		}

		// The looks above are in the audit log, with the account as their target: named once, as the
		// link to the account. A look at a call names the call, and the account it belongs to.
		audit := adm.get(fmt.Sprintf("/support/audit?account=%d", acct.ID))
		account := fmt.Sprintf("account #%d", acct.ID)
		rows := strings.Split(audit.Body[strings.Index(audit.Body, "<tbody>"):], "<tr>")[1:]
		if len(rows) < 7 {
			t.Fatalf("%d audit rows:\n%s", len(rows), trimPage(audit.Body))
		}
		for _, row := range rows {
			if n := strings.Count(row, account); n != 1 || strings.Contains(row, fmt.Sprintf("<code>%d</code>", acct.ID)) {
				t.Errorf("an audit row names %s %d times, or its id again:\n%s", account, n, row)
			}
		}
		audit.contains(t, "call <code>"+call+"</code>")
	})
}
