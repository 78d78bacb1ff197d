package billing

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/models"
)

// ErrInsufficientBalance is returned when the available balance does not cover a reservation.
var ErrInsufficientBalance = errors.New("insufficient balance")

// ErrUnknownAccount is returned for an account id that does not exist.
var ErrUnknownAccount = errors.New("unknown account")

// balances is what a balance UPDATE ... RETURNING reads back, to stamp the entry with the result.
type balances struct {
	AvailableMicros int64
	ReservedMicros  int64
}

// move changes an account's balances by (dAvail, dRes) and appends the ledger entry, inside tx, at the
// caller's clock (e.CreatedAt). When guardAvailable is set the update only happens if available stays >= 0
// afterwards — the atomic conditional update of docs/design.md ("Money"), never a read followed by a
// write.
func move(tx *gorm.DB, e *models.LedgerEntry, guardAvailable bool) error {
	now := e.CreatedAt
	q := "UPDATE accounts SET available_micros = available_micros + ?, reserved_micros = reserved_micros + ?, updated_at = ? WHERE id = ?"
	args := []any{e.DeltaAvailable, e.DeltaReserved, now, e.AccountID}
	if guardAvailable {
		q += " AND available_micros + ? >= 0"
		args = append(args, e.DeltaAvailable)
	}
	if e.Kind == models.KindReserve {
		// A disabled account takes no new work, whichever instance still accepted its key from its
		// cache (docs/support.md): the refusal is the same guarded UPDATE as the balance's.
		q += " AND disabled_at IS NULL"
	}
	q += " RETURNING available_micros, reserved_micros"
	var b []balances
	if err := tx.Raw(q, args...).Scan(&b).Error; err != nil {
		return fmt.Errorf("update balance of account %d: %w", e.AccountID, err)
	}
	if len(b) == 0 {
		if guardAvailable {
			return ErrInsufficientBalance
		}
		return fmt.Errorf("account %d: %w", e.AccountID, ErrUnknownAccount)
	}
	e.AvailableAfter, e.ReservedAfter = b[0].AvailableMicros, b[0].ReservedMicros
	if err := tx.Create(e).Error; err != nil {
		return fmt.Errorf("append %s entry for account %d: %w", e.Kind, e.AccountID, err)
	}
	return nil
}

// Reserve moves amount from available to reserved for a new task, inside the task's create transaction.
// It fails with ErrInsufficientBalance, writing nothing, when available < amount or the account is
// disabled (the caller tells the two apart).
func Reserve(tx *gorm.DB, accountID int64, taskID string, amount money.Micros, now time.Time) error {
	if amount <= 0 {
		return fmt.Errorf("reserve %s for %s: amount must be positive", amount, taskID)
	}
	return move(tx, &models.LedgerEntry{
		AccountID: accountID, Kind: models.KindReserve, TaskID: &taskID,
		DeltaAvailable: -int64(amount), DeltaReserved: int64(amount), CreatedAt: now,
	}, true)
}

// Balance returns an account with its balances.
func Balance(ctx context.Context, d *db.DB, accountID int64) (*models.Account, error) {
	var a models.Account
	if err := d.R.WithContext(ctx).Take(&a, accountID).Error; err != nil {
		return nil, fmt.Errorf("read account %d: %w", accountID, err)
	}
	return &a, nil
}

// Billing states of a task's reservation: reserved at creation, then settled (charged) when the task
// completes or released (refunded) when it fails — exactly once.
const (
	Reserved = "reserved"
	Settled  = "settled"
	Released = "released"
)

// Settle charges a task's reservation inside tx. The task store calls it in the transaction that moved
// the task's billing state from reserved to settled under a WHERE on the old state, which is what makes
// it happen once; the unique (task_id, kind) index refuses a second entry even if code went wrong.
// After the charge it checks the account's balance alerts (low-balance warning, auto-recharge), in the
// same transaction, so a crossing is noticed exactly once.
func Settle(tx *gorm.DB, accountID int64, taskID string, amount money.Micros, now time.Time) error {
	if err := move(tx, &models.LedgerEntry{AccountID: accountID, Kind: models.KindSettle, TaskID: &taskID,
		DeltaReserved: -int64(amount), CreatedAt: now}, false); err != nil {
		return err
	}
	return topups.BalanceFell(tx, accountID, now, true)
}

// Charge is one task's reservation to settle (SettleMany).
type Charge struct {
	AccountID int64
	TaskID    string
	Amount    money.Micros
}

// LockAccounts takes the rows of the accounts ids (in ascending order) before one statement updates them
// all: such an UPDATE locks its rows in the order of its plan, and two batches locking the same accounts
// in opposite orders would wait on each other; taken first in id order, they never do. NO KEY UPDATE is
// the lock the UPDATE itself takes: rows that refer to an account (ledger entries, events) can still be
// inserted. On SQLite, whose single writer serializes every write, there is nothing to take.
func LockAccounts(tx *gorm.DB, ids []int64) error {
	if tx.Dialector.Name() != "postgres" || len(ids) < 2 {
		return nil
	}
	if err := tx.Exec("SELECT id FROM accounts WHERE id IN ? ORDER BY id FOR NO KEY UPDATE", ids).Error; err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	return nil
}

// SettleMany is Settle for several tasks in one transaction (the task store's group-committed
// completions): each gets its settle entry, exactly as Settle writes it, with the balances after it as
// if they had been settled one by one in the order given; each account's balance moves once by the sum
// of its charges, and the balance alerts are checked once for all. Accounts are locked in id order, so
// that two batches never wait on each other.
func SettleMany(tx *gorm.DB, charges []Charge, now time.Time) error {
	if len(charges) == 1 {
		c := charges[0]
		return Settle(tx, c.AccountID, c.TaskID, c.Amount, now)
	}
	if len(charges) == 0 {
		return nil
	}
	sum := map[int64]int64{}
	for _, c := range charges {
		sum[c.AccountID] += int64(c.Amount)
	}
	ids := slices.Sorted(maps.Keys(sum))
	if err := LockAccounts(tx, ids); err != nil {
		return err
	}
	rows := make([]string, len(ids))
	args := []any{now}
	for i, id := range ids {
		rows[i] = "(CAST(? AS BIGINT), CAST(? AS BIGINT))"
		args = append(args, id, sum[id])
	}
	var after []struct {
		ID              int64
		AvailableMicros int64
		ReservedMicros  int64
	}
	if err := tx.Raw(`UPDATE accounts SET reserved_micros = reserved_micros - v.column2, updated_at = ?
		FROM (VALUES `+strings.Join(rows, ", ")+`) AS v WHERE accounts.id = v.column1
		RETURNING accounts.id, accounts.available_micros, accounts.reserved_micros`, args...).Scan(&after).Error; err != nil {
		return fmt.Errorf("update balances: %w", err)
	}
	if len(after) != len(ids) {
		return fmt.Errorf("settle %d accounts, %d found: %w", len(ids), len(after), ErrUnknownAccount)
	}
	// Each entry's balances after it: the account's final balances, less what its later charges took.
	reserved := map[int64]int64{}
	available := map[int64]int64{}
	for _, a := range after {
		reserved[a.ID], available[a.ID] = a.ReservedMicros, a.AvailableMicros
	}
	entries := make([]models.LedgerEntry, len(charges))
	for i := len(charges) - 1; i >= 0; i-- {
		c := charges[i]
		taskID := c.TaskID
		entries[i] = models.LedgerEntry{AccountID: c.AccountID, Kind: models.KindSettle, TaskID: &taskID,
			DeltaReserved: -int64(c.Amount), AvailableAfter: available[c.AccountID], ReservedAfter: reserved[c.AccountID], CreatedAt: now}
		reserved[c.AccountID] += int64(c.Amount)
	}
	if err := tx.Create(&entries).Error; err != nil {
		return fmt.Errorf("append settle entries: %w", err)
	}
	return topups.BalancesFell(tx, ids, now, true)
}

// Release refunds a task's reservation in full inside tx, under the same rule as Settle. why is the task's
// error code (e.g. "cancelled", "generation_failed"), kept as the entry's reason so that a statement or the
// wallet's history can say whether the video was cancelled or failed.
func Release(tx *gorm.DB, accountID int64, taskID string, amount money.Micros, why string, now time.Time) error {
	if err := move(tx, &models.LedgerEntry{AccountID: accountID, Kind: models.KindRelease, TaskID: &taskID,
		DeltaAvailable: int64(amount), DeltaReserved: -int64(amount), Reason: why, CreatedAt: now}, false); err != nil {
		return err
	}
	return topups.BalanceRose(tx, accountID, now)
}

// Credit is a change of available balance that is not about a task: a Stripe top-up or what Stripe gives
// back (refund, dispute, dispute won), a test top-up, or a staff adjustment. Debits may leave available
// below zero (docs/design.md §3): money already spent cannot be un-spent.
type Credit struct {
	AccountID  int64
	Kind       string       // topup, test_topup, refund, dispute or dispute_won (an adjustment is an Adjustment)
	Amount     money.Micros // positive credits, negative debits
	Reason     string
	Actor      string
	ExternalID string    // Stripe's id of the session, PaymentIntent, refund or dispute: never applied twice per kind
	At         time.Time // when it happens, by the caller's clock (zero: now)
}

// ErrDuplicateCredit is returned when a credit with the same kind and external id was already applied.
var ErrDuplicateCredit = errors.New("credit already applied")

// creditSign says which way each kind moves available: +1 credits only, -1 debits only. An adjustment is
// not among them: money moved by hand goes through Adjustment, which writes its audit row with it, so no
// code path can move it unaudited.
var creditSign = map[string]int{
	models.KindTopup: 1, models.KindTestTopup: 1, models.KindDisputeWon: 1,
	models.KindRefund: -1, models.KindDispute: -1,
}

func (c Credit) check() error {
	sign, ok := creditSign[c.Kind]
	switch {
	case c.Kind == models.KindAdjustment:
		return errors.New("an adjustment is made with billing.Adjustment, which audits it")
	case !ok:
		return fmt.Errorf("credit kind %q is not a credit", c.Kind)
	case c.Amount == 0:
		return errors.New("the amount must not be zero")
	case sign > 0 && c.Amount < 0:
		return fmt.Errorf("a %s cannot be negative; use an adjustment to debit", c.Kind)
	case sign < 0 && c.Amount > 0:
		return fmt.Errorf("a %s is a debit: its amount must be negative", c.Kind)
	}
	return nil
}

// Apply writes the credit and its ledger entry in one transaction and returns the entry.
func (c Credit) Apply(ctx context.Context, d *db.DB) (*models.LedgerEntry, error) {
	var e *models.LedgerEntry
	err := d.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		e, err = c.ApplyIn(tx)
		return err
	})
	if err != nil {
		if c.ExternalID != "" && db.IsUniqueViolation(err) {
			return nil, ErrDuplicateCredit
		}
		return nil, err
	}
	return e, nil
}

// ApplyIn writes the credit and its ledger entry inside tx, the transaction of whatever caused it, and
// keeps the account's balance alerts in step: a debit may cross a threshold, a credit re-arms one. A
// second credit with the same kind and external id fails with a unique violation (on PostgreSQL that
// aborts tx: the caller rolls back).
func (c Credit) ApplyIn(tx *gorm.DB) (*models.LedgerEntry, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	at := c.At
	if at.IsZero() {
		at = db.Now()
	}
	at = at.UTC().Truncate(time.Microsecond)
	e := &models.LedgerEntry{AccountID: c.AccountID, Kind: c.Kind, DeltaAvailable: int64(c.Amount), Reason: c.Reason, Actor: c.Actor,
		CreatedAt: at}
	if c.ExternalID != "" {
		ext := c.ExternalID
		e.ExternalID = &ext
	}
	if err := move(tx, e, false); err != nil {
		return nil, err
	}
	var err error
	if c.Amount > 0 {
		err = topups.BalanceRose(tx, c.AccountID, at)
	} else {
		err = topups.BalanceFell(tx, c.AccountID, at, false)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}
