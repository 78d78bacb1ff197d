package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/storetext"
)

// LedgerPage returns an account's entries newest first, older than beforeID when it is set, and
// whether more follow. Entries are append-only, so id order is time order.
func LedgerPage(ctx context.Context, db *gorm.DB, accountID, beforeID int64, limit int) ([]LedgerEntry, bool, error) {
	q := db.WithContext(ctx).Where("account_id = ?", accountID)
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID)
	}
	var out []LedgerEntry
	if err := q.Order("id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, false, fmt.Errorf("read ledger of account %d: %w", accountID, err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// TaskHistory returns a task's log lines and ledger entries, oldest first.
func TaskHistory(ctx context.Context, db *gorm.DB, taskID string) ([]TaskEvent, []LedgerEntry, error) {
	var events []TaskEvent
	if err := db.WithContext(ctx).Where("task_id = ?", taskID).Order("id").Find(&events).Error; err != nil {
		return nil, nil, fmt.Errorf("read task log of %s: %w", taskID, err)
	}
	var entries []LedgerEntry
	if err := db.WithContext(ctx).Where("task_id = ?", taskID).Order("id").Find(&entries).Error; err != nil {
		return nil, nil, fmt.Errorf("read ledger entries of %s: %w", taskID, err)
	}
	return events, entries, nil
}

// ErrNotFound is returned by the single-row lookups here when no row matches.
var ErrNotFound = errors.New("not found")

// AccountKey returns one of an account's keys by id, or ErrNotFound (another account's key too).
func AccountKey(ctx context.Context, db *gorm.DB, accountID, id int64) (*APIKey, error) {
	var k APIKey
	err := db.WithContext(ctx).Where("id = ? AND account_id = ?", id, accountID).Take(&k).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read key %d: %w", id, err)
	}
	return &k, nil
}

// AccountKeys returns an account's API keys, newest first.
func AccountKeys(ctx context.Context, db *gorm.DB, accountID int64) ([]APIKey, error) {
	var out []APIKey
	if err := db.WithContext(ctx).Where("account_id = ?", accountID).Order("id DESC").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read keys of account %d: %w", accountID, err)
	}
	return out, nil
}

// SpendSlice is what an account was charged (settlements) in one slice of time.
type SpendSlice struct {
	Start  time.Time
	Micros int64
}

// spendSliceSeconds is the width of SettledSince's slices: a quarter of an hour, so each falls in one day
// in any time zone (db.Slice).
const spendSliceSeconds = 900

// SettledSince returns an account's charges since a time, summed per quarter of an hour, oldest first: at
// most a hundred rows a day however many videos were charged (the dashboard's 30 days of spending read
// every settlement whole before, five thousand rows for the biggest accounts).
//
// The kind is in the SQL, not a parameter, so that the partial index of the account's settle entries
// (ledger_entries_account_settled, migration 00023) serves it: a planner cannot tell that a parameter
// will match the index's condition (SQLite never, PostgreSQL not in a generic plan).
func SettledSince(ctx context.Context, d *db.DB, accountID int64, since time.Time) ([]SpendSlice, error) {
	var rows []struct {
		Slice  int64
		Micros int64
	}
	slice := d.Slice("created_at", spendSliceSeconds)
	err := d.R.WithContext(ctx).Model(&LedgerEntry{}).Select(slice+" AS slice, CAST(COALESCE(SUM(-delta_reserved), 0) AS BIGINT) AS micros").
		Where("account_id = ? AND kind = '"+KindSettle+"' AND created_at >= ?", accountID, since).Group("slice").Order("slice").Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read charges of account %d: %w", accountID, err)
	}
	out := make([]SpendSlice, len(rows))
	for i, r := range rows {
		out[i] = SpendSlice{Start: time.Unix(r.Slice*spendSliceSeconds, 0).UTC(), Micros: r.Micros}
	}
	return out, nil
}

// Funded reports whether an account has ever been credited — a top-up, a test top-up or an adjustment —
// from the partial index of its credits (ledger_entries_account_funded, migration 00023), whose condition
// the SQL names literally for the same reason as SettledSince's.
func Funded(ctx context.Context, db *gorm.DB, accountID int64) (bool, error) {
	return Exists(ctx, db, &LedgerEntry{}, "account_id = ? AND kind IN ('"+KindTopup+"', '"+KindTestTopup+"', '"+KindAdjustment+"')", accountID)
}

// Exists reports whether any row of model (a table with an id) matches the condition. It reads at most
// one row: a COUNT, even under LIMIT 1, counts every match (an account's whole ledger, on each dashboard
// view). The order by id keeps the plan on the account's index: unordered, PostgreSQL may scan the table
// from its start for the biggest accounts, betting that a match comes early.
func Exists(ctx context.Context, db *gorm.DB, model any, where string, args ...any) (bool, error) {
	var found []int
	if err := db.WithContext(ctx).Model(model).Select("1").Where(where, args...).Order("id").Limit(1).Scan(&found).Error; err != nil {
		return false, fmt.Errorf("check existence: %w", err)
	}
	return len(found) > 0, nil
}

// CallQuery filters an account's call log.
type CallQuery struct {
	AccountID    int64
	From, To     *time.Time
	StatusClass  int // 2, 4 or 5; 0 = any
	KeyPrefix    string
	PathContains string
}

// CallScanWindow bounds what one page of a filtered call log reads: the calls in the time range after the
// cursor, newest first, at most this many. Without it a filter that matches little — a path no call has,
// the 5xx of an account that has few — reads the account's whole call log for one page: seconds for an
// account of a million calls (docs/performance.md, "Figures that hold at a million tasks"). A variable
// only so that tests can make it small.
var CallScanWindow = 5_000

// rowFilters reports whether the query filters calls by what they are, not only by when.
func (q CallQuery) rowFilters() bool {
	return q.StatusClass != 0 || q.KeyPrefix != "" || q.PathContains != ""
}

// scope is the account's calls in the time range: what the index (account_id, at, id) or (at) reads.
func (q CallQuery) scope(db *gorm.DB) *gorm.DB {
	db = db.Where("account_id = ?", q.AccountID)
	if q.From != nil {
		db = db.Where("at >= ?", *q.From)
	}
	if q.To != nil {
		db = db.Where("at < ?", *q.To)
	}
	return db
}

// filter is the query's conditions on the calls themselves.
func (q CallQuery) filter(db *gorm.DB) *gorm.DB {
	if q.StatusClass != 0 {
		db = db.Where("status >= ? AND status < ?", q.StatusClass*100, q.StatusClass*100+100)
	}
	if q.KeyPrefix != "" {
		db = db.Where("key_prefix = ?", q.KeyPrefix)
	}
	if q.PathContains != "" {
		esc := storetext.EscapeLike(q.PathContains)
		db = db.Where(`path LIKE ? ESCAPE '\'`, "%"+esc+"%")
	}
	return db
}

// CallCursor is the position after the last row of a page: rows are ordered by time, then id.
type CallCursor struct {
	At time.Time
	ID int64
}

// older keeps the calls older than the cursor. The bound on at alone is redundant, and it is where the
// index range starts: without it a page far back reads, and drops, every newer call first.
func (c *CallCursor) older(db *gorm.DB) *gorm.DB {
	if c == nil {
		return db
	}
	return db.Where("at <= ? AND ((at < ?) OR (at = ? AND id < ?))", c.At, c.At, c.At, c.ID)
}

// CallsPage returns one page of the filtered call log, newest first, after the cursor when it is set, and
// the cursor of the next page (nil on the last). With a filter on status, key or path it reads at most
// CallScanWindow calls: when fewer than a page of those match, the page holds the matches and the next
// cursor is the last call read, so each page of a rare filter costs a bounded read and the next one goes
// on searching further back.
func CallsPage(ctx context.Context, db *gorm.DB, q CallQuery, after *CallCursor, limit int) ([]CallLog, *CallCursor, error) {
	base := func() *gorm.DB { return after.older(q.scope(db.WithContext(ctx).Model(&CallLog{}))) }
	var out []CallLog
	if !q.rowFilters() {
		if err := base().Order("at DESC, id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
			return nil, nil, fmt.Errorf("read call log: %w", err)
		}
		return pageOfCalls(out, limit), nextCall(out, limit), nil
	}
	window := base().Order("at DESC, id DESC").Limit(CallScanWindow)
	if err := q.filter(db.WithContext(ctx).Table("(?) AS w", window)).Order("at DESC, id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, nil, fmt.Errorf("read call log: %w", err)
	}
	if len(out) > limit {
		return pageOfCalls(out, limit), nextCall(out, limit), nil
	}
	// Fewer than a page matched: the next page starts after the last call read, if the window was full.
	// (An OFFSET of a constant: this reads the window again, never more.)
	var edge []CallLog
	if err := base().Select("at", "id").Order("at DESC, id DESC").Offset(CallScanWindow - 1).Limit(1).Find(&edge).Error; err != nil {
		return nil, nil, fmt.Errorf("read call log: %w", err)
	}
	if len(edge) == 0 {
		return out, nil, nil
	}
	return out, &CallCursor{At: edge[0].At, ID: edge[0].ID}, nil
}

func pageOfCalls(rows []CallLog, limit int) []CallLog { return rows[:min(len(rows), limit)] }

// nextCall is the cursor after a page read with one row more than its limit: its last row, if more follow.
func nextCall(rows []CallLog, limit int) *CallCursor {
	if len(rows) <= limit {
		return nil
	}
	return &CallCursor{At: rows[limit-1].At, ID: rows[limit-1].ID}
}

// TaskCalls returns the API calls that name a task, oldest first (its create, its polls, its downloads).
func TaskCalls(ctx context.Context, db *gorm.DB, accountID int64, taskID string, limit int) ([]CallLog, error) {
	var out []CallLog
	err := db.WithContext(ctx).Where("account_id = ? AND task_id = ?", accountID, taskID).Order("at, id").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read calls of %s: %w", taskID, err)
	}
	return out, nil
}

// CallByRequestID returns the call with this X-Request-Id, or ErrNotFound.
func CallByRequestID(ctx context.Context, db *gorm.DB, requestID string) (*CallLog, error) {
	var out CallLog
	err := db.WithContext(ctx).Where("request_id = ?", requestID).Order("id").Limit(1).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read call %s: %w", requestID, err)
	}
	if out.ID == 0 {
		return nil, ErrNotFound
	}
	return &out, nil
}

// AccountWithOwner returns an account and the e-mail of its owner — its longest-standing current owner,
// else (all removed) its first user — or ErrNotFound.
func AccountWithOwner(ctx context.Context, db *gorm.DB, id int64) (*Account, string, error) {
	var a Account
	err := db.WithContext(ctx).Take(&a, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, "", ErrNotFound
	}
	if err != nil {
		return nil, "", fmt.Errorf("read account %d: %w", id, err)
	}
	var owner User
	if err := db.WithContext(ctx).Where("account_id = ?", id).
		Order("CASE WHEN account_role = 'owner' AND removed_at IS NULL THEN 0 ELSE 1 END, id").Limit(1).Find(&owner).Error; err != nil {
		return nil, "", fmt.Errorf("read the owner of account %d: %w", id, err)
	}
	return &a, owner.Email, nil
}

// AccountUsers returns an account's users, oldest first.
func AccountUsers(ctx context.Context, db *gorm.DB, accountID int64) ([]User, error) {
	var out []User
	if err := db.WithContext(ctx).Where("account_id = ?", accountID).Order("id").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read users of account %d: %w", accountID, err)
	}
	return out, nil
}

// RecentTasks returns an account's newest tasks.
func RecentTasks(ctx context.Context, db *gorm.DB, accountID int64, limit int) ([]Task, error) {
	var out []Task
	if err := db.WithContext(ctx).Where("account_id = ?", accountID).Order("created_at DESC, id DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("read tasks of account %d: %w", accountID, err)
	}
	return out, nil
}

// TaskAccount returns the account a task belongs to, or ErrNotFound.
func TaskAccount(ctx context.Context, db *gorm.DB, taskID string) (int64, error) {
	var t Task
	if err := db.WithContext(ctx).Select("id", "account_id").Where("id = ?", taskID).Limit(1).Find(&t).Error; err != nil {
		return 0, fmt.Errorf("read task %s: %w", taskID, err)
	}
	if t.ID == "" {
		return 0, ErrNotFound
	}
	return t.AccountID, nil
}

// Credential returns an upstream credential's row (never a secret: the row holds none), or ErrNotFound.
func Credential(ctx context.Context, db *gorm.DB, id string) (*UpstreamCredential, error) {
	var c UpstreamCredential
	if err := db.WithContext(ctx).Where("id = ?", id).Limit(1).Find(&c).Error; err != nil {
		return nil, fmt.Errorf("read credential %s: %w", id, err)
	}
	if c.ID == "" {
		return nil, ErrNotFound
	}
	return &c, nil
}

// UserByID returns a user, or ErrNotFound.
func UserByID(ctx context.Context, db *gorm.DB, id int64) (*User, error) {
	var u User
	err := db.WithContext(ctx).Take(&u, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read user %d: %w", id, err)
	}
	return &u, nil
}
