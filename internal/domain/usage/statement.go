package usage

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/models"
)

// ErrNoStatement is returned for a month that is not a statement's: not YYYY-MM, in the future, or
// before the account existed.
var ErrNoStatement = errors.New("no statement for this month")

var monthRE = regexp.MustCompile(`^([0-9]{4})-([0-9]{2})$`)

// ParseMonth reads a statement's month ("2026-03") in the account's zone: the first instant of that
// month there. A month not in the calendar is ErrNoStatement.
func ParseMonth(text string, loc *time.Location) (time.Time, error) {
	m := monthRE.FindStringSubmatch(text)
	if m == nil {
		return time.Time{}, ErrNoStatement
	}
	year, _ := strconv.Atoi(m[1])
	month, _ := strconv.Atoi(m[2])
	if month < 1 || month > 12 || year < 2000 {
		return time.Time{}, ErrNoStatement
	}
	return time.Date(year, time.Month(month), 1, 0, 0, 0, 0, loc), nil
}

// MonthOf is the first instant of the month holding t, in loc.
func MonthOf(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
}

// Balance is an account's two balances at one moment. What the customer owns is their sum: a
// reservation is still their money until the video it holds for is charged or fails.
type Balance struct {
	Available, Reserved int64
}

// Total is what the account holds: available and reserved.
func (b Balance) Total() int64 { return b.Available + b.Reserved }

// KindSum is the entries of one kind in a statement's month, summed exactly as the ledger moved them.
type KindSum struct {
	Count     int64
	Available int64 // the sum of delta_available
	Reserved  int64 // the sum of delta_reserved
}

// Net is what the entries changed the account's total by.
func (k KindSum) Net() int64 { return k.Available + k.Reserved }

// ModelCharge is what the videos of one model charged in the month (their settlements).
type ModelCharge struct {
	Model   string
	Videos  int64
	Seconds int64
	Micros  int64 // positive: what was charged
}

// MaxListed bounds the money movements not about a video (top-ups, refunds, disputes, adjustments) a
// statement lists one by one; their sums always cover them all.
const MaxListed = 500

// Statement is one calendar month of an account's ledger, in the account's zone. Its period is cut at
// ledger entries: it holds the entries after the last one recorded before the month's first instant, up
// to the last one recorded before the next month's (or, for the month under way, the newest). So the
// opening balance is what the entry before the month left, the closing one what the month's last entry
// left, each month's closing balance is the next month's opening, and the opening plus every entry
// equals the closing balance to the micro-dollar — Build refuses a statement where it would not.
type Statement struct {
	AccountID  int64
	Month, End time.Time // the first instants of the month and of the next, in Loc
	Loc        *time.Location
	// Partial is set for the month under way: the closing balance is as of At.
	Partial bool
	At      time.Time
	Opening Balance
	Closing Balance
	// The month's entries are those with afterID < id <= lastID.
	afterID, lastID int64
	Entries         int64
	Kinds           map[string]KindSum
	Charges         []ModelCharge // by model, the most charged first
	// Listed are the month's entries that are not about a video, oldest first (at most MaxListed).
	Listed []models.LedgerEntry
}

// Kind returns the month's sum of one kind of entry (zero when there was none).
func (s *Statement) Kind(kind string) KindSum { return s.Kinds[kind] }

// Charged is what the month's videos were charged, positive.
func (s *Statement) Charged() int64 { return -s.Kind(models.KindSettle).Net() }

// ChargedVideos and ChargedSeconds count the videos charged in the month.
func (s *Statement) ChargedVideos() (videos, seconds int64) {
	for _, c := range s.Charges {
		videos, seconds = videos+c.Videos, seconds+c.Seconds
	}
	return videos, seconds
}

// Label is the month for people: "March 2026".
func (s *Statement) Label() string { return s.Month.Format("January 2006") }

// Key is the month as its URL writes it: "2026-03".
func (s *Statement) Key() string { return s.Month.Format("2006-01") }

// cutWindow is how far a ledger entry's time may trail an entry recorded before it: an entry is stamped by
// its writer's clock just before its transaction waits for the account's row, so two racing writes can
// be recorded out of time order by that wait — milliseconds, never an hour.
const cutWindow = time.Hour

// cutter finds the id of the last ledger entry of an account recorded before t (0 when none was). Ids are
// assigned under the account's row lock, in the order the balances moved, so a cut splits the ledger
// where its running balances stand.
type cutter func(ctx context.Context, d *db.DB, accountID int64, t time.Time) (int64, error)

// cut is the cutter statements use: the entry stamped last before t (one step down the
// ledger_entries_account_created index), then the highest id stamped within cutWindow before it. That is
// the highest id stamped before t whenever no entry trails one recorded before it by more than
// cutWindow, without reading the account's whole history.
func cut(ctx context.Context, d *db.DB, accountID int64, t time.Time) (int64, error) {
	var last []models.LedgerEntry
	err := d.R.WithContext(ctx).Select("id", "created_at").Where("account_id = ? AND created_at < ?", accountID, t.UTC()).
		Order("created_at DESC, id DESC").Limit(1).Find(&last).Error
	if err != nil || len(last) == 0 {
		return 0, cutError(accountID, t, err)
	}
	var ids []int64
	err = d.R.WithContext(ctx).Model(&models.LedgerEntry{}).Where("account_id = ? AND created_at >= ? AND created_at < ?", accountID,
		last[0].CreatedAt.Add(-cutWindow).UTC(), t.UTC()).Order("id DESC").Limit(1).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, cutError(accountID, t, err)
	}
	return ids[0], nil
}

// exactCut is the highest id stamped before t, whatever the clocks did: it reads every entry before t,
// so a statement uses it only when cut's months do not close.
func exactCut(ctx context.Context, d *db.DB, accountID int64, t time.Time) (int64, error) {
	var ids []int64
	err := d.R.WithContext(ctx).Model(&models.LedgerEntry{}).Where("account_id = ? AND created_at < ?", accountID, t.UTC()).
		Order("id DESC").Limit(1).Pluck("id", &ids).Error
	if err != nil || len(ids) == 0 {
		return 0, cutError(accountID, t, err)
	}
	return ids[0], nil
}

func cutError(accountID int64, t time.Time, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("cut the ledger of account %d at %s: %w", accountID, t.UTC().Format(time.RFC3339), err)
}

// balanceAfter is what the entry left; zero balances for no entry (id 0).
func balanceAfter(ctx context.Context, d *db.DB, id int64) (Balance, error) {
	if id == 0 {
		return Balance{}, nil
	}
	var e models.LedgerEntry
	if err := d.R.WithContext(ctx).Take(&e, id).Error; err != nil {
		return Balance{}, fmt.Errorf("read ledger entry %d: %w", id, err)
	}
	return Balance{Available: e.AvailableAfter, Reserved: e.ReservedAfter}, nil
}

// errNotClosed marks a statement whose opening balance and entries do not make its closing balance.
var errNotClosed = errors.New("does not close")

// BuildStatement reads the statement of the month starting at month (ParseMonth) for an account whose
// zone is month's location, as of now. A month after now's, or before the one the account was created
// in, is ErrNoStatement.
func BuildStatement(ctx context.Context, d *db.DB, acct *models.Account, month, now time.Time) (*Statement, error) {
	loc := month.Location()
	if month.After(now) || month.Before(MonthOf(acct.CreatedAt, loc)) {
		return nil, ErrNoStatement
	}
	s, err := buildStatement(ctx, d, acct, month, now, cut)
	if errors.Is(err, errNotClosed) {
		// Clocks far apart wrote the ledger out of order around a cut: cut it reading every entry.
		s, err = buildStatement(ctx, d, acct, month, now, exactCut)
	}
	return s, err
}

func buildStatement(ctx context.Context, d *db.DB, acct *models.Account, month, now time.Time, cut cutter) (*Statement, error) {
	loc := month.Location()
	s := &Statement{AccountID: acct.ID, Month: month, End: month.AddDate(0, 1, 0), Loc: loc, At: now, Kinds: map[string]KindSum{}}
	s.Partial = now.Before(s.End)
	var err error
	if s.afterID, err = cut(ctx, d, acct.ID, s.Month); err != nil {
		return nil, err
	}
	end := s.End
	if s.Partial {
		end = now
	}
	if s.lastID, err = cut(ctx, d, acct.ID, end); err != nil {
		return nil, err
	}
	if s.Opening, err = balanceAfter(ctx, d, s.afterID); err != nil {
		return nil, err
	}
	if s.Closing, err = balanceAfter(ctx, d, s.lastID); err != nil {
		return nil, err
	}
	// The month's entries, read by the ledger_entries_account (account_id, id) index.
	entries := func() *gorm.DB {
		return d.R.WithContext(ctx).Model(&models.LedgerEntry{}).Where("account_id = ? AND id > ? AND id <= ?", acct.ID, s.afterID, s.lastID)
	}

	var kinds []struct {
		Kind      string
		Count     int64
		Available int64
		Reserved  int64
	}
	if err := entries().Select("kind, COUNT(*) AS count, " + sum("delta_available") + " AS available, " + sum("delta_reserved") + " AS reserved").
		Group("kind").Scan(&kinds).Error; err != nil {
		return nil, fmt.Errorf("sum the ledger of account %d for %s: %w", acct.ID, s.Key(), err)
	}
	var moved Balance
	for _, k := range kinds {
		s.Kinds[k.Kind] = KindSum{Count: k.Count, Available: k.Available, Reserved: k.Reserved}
		s.Entries += k.Count
		moved.Available += k.Available
		moved.Reserved += k.Reserved
	}

	if err := d.R.WithContext(ctx).Raw(`SELECT COALESCE(t.model, '') AS model, COUNT(*) AS videos, `+sum("t.seconds")+` AS seconds, `+sum("-e.delta_reserved")+` AS micros
		FROM ledger_entries e LEFT JOIN tasks t ON t.id = e.task_id
		WHERE e.account_id = ? AND e.id > ? AND e.id <= ? AND e.kind = ?
		GROUP BY t.model ORDER BY micros DESC, model`, acct.ID, s.afterID, s.lastID, models.KindSettle).Scan(&s.Charges).Error; err != nil {
		return nil, fmt.Errorf("sum the charges of account %d for %s per model: %w", acct.ID, s.Key(), err)
	}
	if err := entries().Where("task_id IS NULL").Order("id").Limit(MaxListed).Find(&s.Listed).Error; err != nil {
		return nil, fmt.Errorf("list the payments of account %d for %s: %w", acct.ID, s.Key(), err)
	}

	// The books must close: the opening balances plus every entry of the month are the closing ones, and
	// the charges per model are every settlement. Anything else is a ledger that does not add up, which
	// must not be printed as a statement.
	if s.Opening.Available+moved.Available != s.Closing.Available || s.Opening.Reserved+moved.Reserved != s.Closing.Reserved {
		return nil, fmt.Errorf("statement of account %d for %s %w: opening %+v + entries %+v ≠ closing %+v (entries %d–%d)",
			acct.ID, s.Key(), errNotClosed, s.Opening, moved, s.Closing, s.afterID+1, s.lastID)
	}
	var charged int64
	for _, c := range s.Charges {
		charged += c.Micros
	}
	if charged != s.Charged() {
		return nil, fmt.Errorf("statement of account %d for %s: charges per model sum to %d, settlements to %d", acct.ID, s.Key(), charged, s.Charged())
	}
	return s, nil
}

// Months lists the months an account has statements with entries for, newest first, in its zone up to
// now: the months in which an entry was stamped before now (at most the last 120). It hops from month to
// month down the (account_id, created_at) index: the newest entry before a bound names its month, whose
// start is the next bound — one index probe per month that has entries, however many entries each holds.
// (Counting the entries of ten years per month read every one of them: 150,000 for the biggest accounts,
// a tenth of a second on each Usage page.) The months are cut in Go, in the account's zone, which SQLite's
// SQL cannot do.
func Months(ctx context.Context, d *db.DB, accountID int64, loc *time.Location, now time.Time) ([]time.Time, error) {
	const most = 120
	oldest := MonthOf(now, loc).AddDate(0, -(most - 1), 0)
	var out []time.Time
	for bound := now.UTC(); len(out) < most; {
		// The column itself rather than MAX(created_at): SQLite then hands back a time, not the text it stores.
		var newest []models.LedgerEntry
		if err := d.R.WithContext(ctx).Select("created_at").Where("account_id = ? AND created_at >= ? AND created_at < ?", accountID, oldest.UTC(), bound).
			Order("created_at DESC").Limit(1).Find(&newest).Error; err != nil {
			return nil, fmt.Errorf("months of the ledger of account %d: %w", accountID, err)
		}
		if len(newest) == 0 {
			break
		}
		m := MonthOf(newest[0].CreatedAt, loc)
		out = append(out, m)
		bound = m.UTC()
	}
	return out, nil
}
