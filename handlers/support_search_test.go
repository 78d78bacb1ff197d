package handlers_test

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestStaffSearchByPartOfAnAddress: the staff search finds users by any part of their address — a
// domain, a name, in any case — treats LIKE's wildcards and its escape character as the characters they
// are, and lists many matches a page at a time; on PostgreSQL a trigram index serves the search.
func TestStaffSearchByPartOfAnAddress(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		sup := signInStaff(t, s, "helpdesk@support.test", models.RoleSupport)
		ctx := context.Background()
		account := map[string]int64{}
		user := func(email string) {
			t.Helper()
			u, err := accounts.Create(ctx, s.DB, accounts.NewUser{Email: email, Verified: true})
			if err != nil {
				t.Fatal(err)
			}
			account[email] = u.AccountID
		}
		for _, e := range []string{"alice@example.com", "natalie@example.com", "bob@other.org",
			"carol_x@shop.test", "dave%off@shop.test", "erin@shop.test"} {
			user(e)
		}
		// Addresses stored before they were lower-cased, and one with a backslash (which the sign-up form
		// would quote): written as they are, under the form.
		for old, stored := range map[string]string{"erin@shop.test": `e\rin@shop.test`, "natalie@example.com": "Natalie@EXAMPLE.com"} {
			if err := s.DB.W.Model(&models.User{}).Where("email = ?", old).Update("email", stored).Error; err != nil {
				t.Fatal(err)
			}
			account[stored] = account[old]
		}
		accountOf := func(email string) string { return fmt.Sprintf("/support/accounts/%d", account[email]) }

		for _, c := range []struct {
			name, q string
			list    []string // the addresses listed, in order; nil when the search opens one account
			opens   string   // the account page one match opens
		}{
			{name: "a domain", q: "example.com", list: []string{"Natalie@EXAMPLE.com", "alice@example.com"}},
			{name: "a domain in capitals", q: "EXAMPLE.com", list: []string{"Natalie@EXAMPLE.com", "alice@example.com"}},
			{name: "a domain with its @", q: "@Example.COM", list: []string{"Natalie@EXAMPLE.com", "alice@example.com"}},
			{name: "part of a name, anywhere", q: "ali", list: []string{"Natalie@EXAMPLE.com", "alice@example.com"}},
			{name: "part of a name in capitals", q: "ALIC", opens: accountOf("alice@example.com")},
			{name: "a whole other domain", q: "other.org", opens: accountOf("bob@other.org")},
			{name: "a stored capital found by a small letter", q: "natalie@", opens: accountOf("Natalie@EXAMPLE.com")},
			{name: "underscore is a character, not any one", q: "l_x", opens: accountOf("carol_x@shop.test")},
			{name: "underscore alone", q: "_", opens: accountOf("carol_x@shop.test")},
			{name: "percent is a character, not any run", q: "%", opens: accountOf("dave%off@shop.test")},
			{name: "percent inside", q: "e%o", opens: accountOf("dave%off@shop.test")},
			{name: "the escape character", q: `\`, opens: accountOf(`e\rin@shop.test`)},
			{name: "the escape character before a letter", q: `e\r`, opens: accountOf(`e\rin@shop.test`)},
			{name: "a domain of three", q: "shop.test", list: []string{"carol_x@shop.test", "dave%off@shop.test", `e\rin@shop.test`}},
			{name: "nothing", q: "nobody.invalid"},
		} {
			t.Run(c.name, func(t *testing.T) {
				got := sup.get("/support/search?q=" + url.QueryEscape(c.q))
				if c.opens != "" {
					if got.Status != 303 || got.location() != c.opens {
						t.Fatalf("q=%q: %d → %q, want 303 → %q\n%s", c.q, got.Status, got.location(), c.opens, trimPage(got.Body))
					}
					return
				}
				if got.Status != 200 {
					t.Fatalf("q=%q: %d", c.q, got.Status)
				}
				if listed := foundUsers(got.Body); !slices.Equal(listed, c.list) {
					t.Fatalf("q=%q lists %q, want %q", c.q, listed, c.list)
				}
				if c.list == nil {
					got.contains(t, "Nothing matches")
				}
			})
		}

		// Many matches: 25 a page in address order, the next page after the last shown; a last page of one
		// lists it rather than opening it.
		var want []string
		for i := range 26 {
			e := fmt.Sprintf("member-%02d@Paged.test", i)
			user(e)
			want = append(want, strings.ToLower(e))
		}
		first := sup.get("/support/search?q=" + url.QueryEscape("PAGED.TEST"))
		page1 := foundUsers(first.Body)
		next := nextPageRE.FindStringSubmatch(first.Body)
		if first.Status != 200 || len(page1) != 25 || next == nil || strings.Contains(first.Body, "First page") {
			t.Fatalf("page 1: %d, %d users, next link %v:\n%s", first.Status, len(page1), next, trimPage(first.Body))
		}
		second := sup.get(html.UnescapeString(next[1]))
		page2 := foundUsers(second.Body)
		if second.Status != 200 || len(page2) != 1 || nextPageRE.MatchString(second.Body) || !strings.Contains(second.Body, "First page") {
			t.Fatalf("page 2: %d, %q:\n%s", second.Status, page2, trimPage(second.Body))
		}
		if all := append(page1, page2...); !slices.Equal(all, want) {
			t.Fatalf("the two pages list %q, want %q", all, want)
		}

		// On PostgreSQL the search's condition is served by the trigram index of migration 00021.
		if strings.HasPrefix(dbURL, "postgres") {
			var plan []string
			err := s.DB.R.Transaction(func(tx *gorm.DB) error {
				if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
					return err
				}
				return tx.Raw(`EXPLAIN SELECT * FROM users WHERE lower(email) LIKE ? ESCAPE '\' ORDER BY email LIMIT 26`, "%example.com%").Scan(&plan).Error
			})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(plan, "\n"), "users_email_trgm") {
				t.Errorf("the search does not use the trigram index:\n%s", strings.Join(plan, "\n"))
			}
		}
	})
}

var (
	// resultRowRE is one row of the search's results: its link, then what it is.
	resultRowRE = regexp.MustCompile(`<tr><td class="head id" data-fit="action"><a href="[^"]*">([^<]*)</a></td><td data-label="Found">([a-z]+)</td>`)
	nextPageRE  = regexp.MustCompile(`<a href="([^"]*)">Next page →</a>`)
)

// foundUsers lists the addresses of the users a search results page shows, in order.
func foundUsers(body string) []string {
	var out []string
	for _, m := range resultRowRE.FindAllStringSubmatch(body, -1) {
		if m[2] == "user" {
			out = append(out, html.UnescapeString(m[1]))
		}
	}
	return out
}
