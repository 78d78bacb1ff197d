// Package staffsearch reads what a support engineer pastes — an e-mail, an account id, a key prefix, a
// task, media or request id — and finds what it names across every tenant.
package staffsearch

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"videogen/internal/infra/storetext"
	"videogen/models"
)

// Match is one thing found, with the staff page that shows it.
type Match struct {
	Kind  string // "account", "user", "key", "task", "media", "call"
	Label string
	Href  string
	Note  string
}

// Result is what a query found, and the query as it was read (Term: never a whole secret).
type Result struct {
	Term    string
	Matches []Match
	Hint    string
	// Next is the cursor of the page after this one ("" when this is the last): a search by part of an
	// e-mail address can match any number of users, listed a page at a time in address order.
	Next string
}

// Page is which page of a query's matches to list: those after the cursor After (a Result's Next; ""
// for the first page), at most Limit.
type Page struct {
	After string
	Limit int
}

var (
	keyPrefixRE = regexp.MustCompile(`^vg_[0-9A-Za-z]{8}$`)
	// wholeKeyRE finds a secret pasted anywhere in the query ("Bearer vg_…", a line of a log): more than
	// a prefix's characters after vg_.
	wholeKeyRE = regexp.MustCompile(`vg_[0-9A-Za-z]{9,}`)
	idRE       = regexp.MustCompile(`^(video|file|req)_[0-9A-Za-z]{1,64}$`)
)

const keyPrefixLen = len("vg_") + 8

// Errors of a query that is not searched (and so not audited either).
var (
	// ErrEmpty is a query of nothing but white space: there is nothing to look for, and listing every
	// user instead would show everyone to a stray Enter.
	ErrEmpty = errors.New("nothing to search for")
	// ErrUnsearchable is a query holding a NUL or another control or format character, or bytes that
	// are not UTF-8. It is refused, not cleaned: what is searched, and what the audit log records, must be what
	// was typed.
	ErrUnsearchable = errors.New("the search holds a control character or bytes that are not text")
)

// invisible reports a control or format character (NUL, a line break, a zero-width space, a
// right-to-left override): none belongs in an address or an id, and in the audit log they would make a
// search look blank or read backwards.
func invisible(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// maxQuery bounds what is searched and recorded; the longest e-mail address is 254 bytes.
const maxQuery = 254

// Find reads q and looks for what it names; at most page.Limit matches, after page.After.
func Find(ctx context.Context, db *gorm.DB, q string, page Page) (Result, error) {
	limit := max(page.Limit, 1)
	q = strings.TrimSpace(q)
	if q == "" {
		return Result{}, ErrEmpty
	}
	if !utf8.ValidString(q) || strings.ContainsFunc(q, invisible) {
		return Result{}, ErrUnsearchable
	}
	q, _ = storetext.Clip(q, maxQuery) // never half a character
	r := Result{Term: q}
	if key := wholeKeyRE.FindString(q); key != "" {
		// A whole key was pasted: only its prefix is looked at, and only the prefix is kept — the term is
		// what the audit log records.
		r.Term = key[:keyPrefixLen]
		r.Hint = "That contained a whole API key; only its prefix " + r.Term + " was used. Ask the customer to revoke the key: it was shared."
		return r, r.keys(db.WithContext(ctx), r.Term, limit)
	}
	db = db.WithContext(ctx)
	switch {
	case keyPrefixRE.MatchString(q):
		return r, r.keys(db, q, limit)
	case idRE.MatchString(q):
		switch {
		case strings.HasPrefix(q, "video_"):
			return r, r.task(db, q)
		case strings.HasPrefix(q, "file_"):
			return r, r.media(db, q)
		default:
			return r, r.call(db, q)
		}
	}
	if n, err := strconv.ParseInt(strings.TrimPrefix(q, "#"), 10, 64); err == nil && n > 0 {
		return r, r.account(db, n)
	}
	return r, r.users(db, q, page.After, limit)
}

func accountHref(id int64) string { return "/support/accounts/" + strconv.FormatInt(id, 10) }

func (r *Result) keys(db *gorm.DB, prefix string, limit int) error {
	var keys []models.APIKey
	if err := db.Where("prefix = ?", prefix).Limit(limit).Find(&keys).Error; err != nil {
		return fmt.Errorf("search keys: %w", err)
	}
	for _, k := range keys {
		note := "key “" + k.Name + "” of account " + strconv.FormatInt(k.AccountID, 10)
		if k.RevokedAt != nil {
			note += " (revoked)"
		}
		r.Matches = append(r.Matches, Match{Kind: "key", Label: k.Prefix + "…", Href: accountHref(k.AccountID), Note: note})
	}
	return nil
}

func (r *Result) task(db *gorm.DB, id string) error {
	var t models.Task
	if err := db.Select("id", "account_id", "status").Where("id = ?", id).Limit(1).Find(&t).Error; err != nil {
		return fmt.Errorf("search tasks: %w", err)
	}
	if t.ID != "" {
		r.Matches = append(r.Matches, Match{Kind: "task", Label: t.ID, Href: accountHref(t.AccountID) + "/tasks/" + t.ID,
			Note: t.Status + ", account " + strconv.FormatInt(t.AccountID, 10)})
	}
	return nil
}

func (r *Result) media(db *gorm.DB, id string) error {
	var m models.Media
	if err := db.Select("id", "account_id", "kind", "state").Where("id = ?", id).Limit(1).Find(&m).Error; err != nil {
		return fmt.Errorf("search media: %w", err)
	}
	if m.ID != "" {
		r.Matches = append(r.Matches, Match{Kind: "media", Label: m.ID, Href: accountHref(m.AccountID),
			Note: m.Kind + " file (" + m.State + ") of account " + strconv.FormatInt(m.AccountID, 10)})
	}
	return nil
}

func (r *Result) call(db *gorm.DB, id string) error {
	var c models.CallLog
	if err := db.Where("request_id = ?", id).Order("id").Limit(1).Find(&c).Error; err != nil {
		return fmt.Errorf("search calls: %w", err)
	}
	if c.ID != 0 {
		r.Matches = append(r.Matches, Match{Kind: "call", Label: c.RequestID, Href: "/support/calls/" + c.RequestID,
			Note: c.Method + " " + c.Path + " → " + strconv.Itoa(c.Status)})
	} else {
		r.Hint = "No call has this request id. Calls older than the call-log retention are deleted; the ledger and the tasks are kept."
	}
	return nil
}

func (r *Result) account(db *gorm.DB, id int64) error {
	var a models.Account
	if err := db.Where("id = ?", id).Limit(1).Find(&a).Error; err != nil {
		return fmt.Errorf("search accounts: %w", err)
	}
	if a.ID != 0 {
		r.Matches = append(r.Matches, Match{Kind: "account", Label: "#" + strconv.FormatInt(a.ID, 10), Href: accountHref(a.ID), Note: a.Name})
	}
	return nil
}

// users finds users whose address holds q anywhere — a name, part of one, a domain such as example.com —
// in any case, in address order, limit at a time after the address after. q is matched literally: LIKE's
// wildcards (% and _) and the escape character in it are escaped, and it is a bound parameter.
//
// On PostgreSQL a trigram index on lower(email) serves this infix search when the pg_trgm extension
// could be installed (migration 00021); without it, and on SQLite, it reads the users table, which a
// staff search (rare, by a person) can afford. A B-tree on lower(email) would serve prefix searches only.
//
// PostgreSQL plans it for its pattern every time (plan_cache_mode, for this transaction only): the
// driver prepares a statement once per connection, and after five runs PostgreSQL may keep a generic
// plan, which knows no pattern and walks the users in address order through the e-mail's unique index,
// reading every one that does not match — 5.3 ms at 10,000 users against 0.7 ms by the trigram index,
// growing with the users (docs/performance.md, step 7).
func (r *Result) users(db *gorm.DB, q, after string, limit int) error {
	pattern := "%" + storetext.EscapeLike(strings.ToLower(q)) + "%"
	var users []models.User
	find := func(tx *gorm.DB) error {
		query := tx.Where(`lower(email) LIKE ? ESCAPE '\'`, pattern)
		if after != "" {
			query = query.Where("email > ?", after)
		}
		return query.Order("email").Limit(limit + 1).Find(&users).Error
	}
	var err error
	if db.Dialector.Name() == "postgres" {
		err = db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SET LOCAL plan_cache_mode = force_custom_plan").Error; err != nil {
				return err
			}
			return find(tx)
		})
	} else {
		err = find(db)
	}
	if err != nil {
		return fmt.Errorf("search users: %w", err)
	}
	if len(users) > limit {
		users = users[:limit]
		r.Next = users[limit-1].Email
	}
	for _, u := range users {
		r.Matches = append(r.Matches, Match{Kind: "user", Label: u.Email, Href: accountHref(u.AccountID),
			Note: u.Role + " of account " + strconv.FormatInt(u.AccountID, 10)})
	}
	return nil
}
