package billing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/domain/audit"
	"videogen/internal/infra/db"
	"videogen/internal/infra/storetext"
	"videogen/internal/money"
	"videogen/models"
)

// MaxAdjustment bounds one staff credit or debit: a larger one is almost certainly a typo (an extra
// zero), and a real one can be made in parts, each with its reason.
const MaxAdjustment = 100_000 * money.PerUSD

// ErrWouldGoNegative is returned for a debit that would leave available below zero when the admin did not
// say that it may.
var ErrWouldGoNegative = errors.New("the debit would take the available balance below zero")

// InvalidError is an admin's input that cannot be applied, said so the admin can correct it.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

func invalid(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// ParseAdjustment reads an amount typed in dollars ("25", "25.50", "0.000001") as a credit or a debit.
// The amount is positive; direction ("credit" or "debit") gives the sign.
func ParseAdjustment(direction, amount string) (money.Micros, error) {
	var sign money.Micros
	switch direction {
	case "credit":
		sign = 1
	case "debit":
		sign = -1
	default:
		return 0, invalid("Choose credit or debit.")
	}
	m, err := money.ParseUSD(amount)
	switch {
	case strings.TrimSpace(amount) == "":
		return 0, invalid("Enter an amount in dollars, such as 25.00.")
	case err != nil:
		return 0, invalid("Enter the amount in dollars and cents, such as 25.00 (not %q).", strings.TrimSpace(amount))
	case m%money.Cent != 0:
		// Customers count in cents (docs/support.md): a fraction of a cent is a typo, not an amount.
		return 0, invalid("Enter whole cents, such as %s: a wallet is credited and debited in cents.", (m / money.Cent * money.Cent).USD())
	case m < 0:
		return 0, invalid("Enter the amount without a sign; choose credit or debit for its direction.")
	case m == 0:
		return 0, invalid("The amount must be more than zero.")
	case m > MaxAdjustment:
		return 0, invalid("The amount is over %s, the most one adjustment may move. Check it, or make it in parts.", MaxAdjustment.USD())
	}
	return sign * m, nil
}

// Adjustment is a staff credit (positive amount) or debit (negative) of an account's available balance:
// a ledger entry of kind adjustment that names the staff member and the reason, and an audit row, in
// one transaction.
type Adjustment struct {
	AccountID int64
	Amount    money.Micros
	Reason    string
	// CustomerNote is what the customer reads in their ledger; "" shows "Adjustment by support". The
	// Reason is for staff only.
	CustomerNote string
	// AllowNegative lets a debit take available below zero: the admin confirmed it knowingly (money
	// already spent cannot be un-spent, so the books may have to show a debt).
	AllowNegative bool
	By            audit.Actor
	At            time.Time // when it happens, by the caller's clock
}

func (a Adjustment) check() (Adjustment, error) {
	reason, err := audit.CheckReason(a.Reason)
	if err != nil {
		return a, err
	}
	a.Reason = reason
	note, cut := storetext.Clip(strings.TrimSpace(a.CustomerNote), 300)
	if cut {
		return a, invalid("The note to the customer is longer than 300 characters.")
	}
	a.CustomerNote = note
	switch {
	case a.Amount == 0:
		return a, invalid("The amount must be more than zero.")
	case a.Amount > MaxAdjustment || a.Amount < -MaxAdjustment:
		return a, invalid("The amount is over %s, the most one adjustment may move.", MaxAdjustment.USD())
	}
	return a, nil
}

// LedgerActor is how the ledger's actor column names who made an adjustment: "staff:<e-mail>" for a
// signed-in staff member, "cli" (or what the command line says) otherwise.
func LedgerActor(who audit.Actor) string {
	if who.UserID != nil {
		return "staff:" + who.Name
	}
	return who.Name
}

// AdjustmentPreview is what an adjustment would do to the balance, for the confirmation page.
type AdjustmentPreview struct {
	Available money.Micros // now
	After     money.Micros // once applied
	Negative  bool         // After is below zero: the debit needs AllowNegative
}

// Preview checks the adjustment and says what it would do to the account's available balance now.
func (a Adjustment) Preview(ctx context.Context, d *db.DB) (AdjustmentPreview, error) {
	a, err := a.check()
	if err != nil {
		return AdjustmentPreview{}, err
	}
	acct, err := Balance(ctx, d, a.AccountID)
	if err != nil {
		return AdjustmentPreview{}, err
	}
	after := money.Micros(acct.AvailableMicros) + a.Amount
	return AdjustmentPreview{Available: money.Micros(acct.AvailableMicros), After: after, Negative: a.Amount < 0 && after < 0}, nil
}

// Apply writes the adjustment, its balance alerts and its audit row in one transaction, and returns the
// ledger entry. A debit that would leave available below zero fails with ErrWouldGoNegative, writing
// nothing, unless AllowNegative is set; the check is the guarded UPDATE of the ledger, so a customer's
// create racing the debit cannot slip between a read and the write.
func (a Adjustment) Apply(ctx context.Context, d *db.DB) (*models.LedgerEntry, error) {
	a, err := a.check()
	if err != nil {
		return nil, err
	}
	at := a.At
	if at.IsZero() {
		at = db.Now()
	}
	at = at.UTC().Truncate(time.Microsecond)
	e := &models.LedgerEntry{AccountID: a.AccountID, Kind: models.KindAdjustment, DeltaAvailable: int64(a.Amount),
		Reason: a.Reason, CustomerNote: a.CustomerNote, Actor: LedgerActor(a.By), CreatedAt: at}
	err = d.Tx(ctx, func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&models.Account{}).Where("id = ?", a.AccountID).Count(&n).Error; err != nil {
			return fmt.Errorf("find account %d: %w", a.AccountID, err)
		}
		if n == 0 {
			return fmt.Errorf("account %d: %w", a.AccountID, ErrUnknownAccount)
		}
		if err := move(tx, e, a.Amount < 0 && !a.AllowNegative); err != nil {
			if errors.Is(err, ErrInsufficientBalance) {
				return ErrWouldGoNegative
			}
			return err
		}
		var err error
		if a.Amount > 0 {
			err = topups.BalanceRose(tx, a.AccountID, at)
		} else {
			err = topups.BalanceFell(tx, a.AccountID, at, false) // a correction never starts an auto-recharge
		}
		if err != nil {
			return err
		}
		action := audit.Credit
		if a.Amount < 0 {
			action = audit.Debit
		}
		before := money.Micros(e.AvailableAfter) - a.Amount
		return audit.Record(ctx, tx, at, a.By, audit.Entry{Action: action, TargetType: audit.TargetAccount, TargetID: audit.AccountRef(a.AccountID),
			AccountID: a.AccountID, Reason: a.Reason,
			Detail: fmt.Sprintf("%s; available %s → %s; ledger entry %d", signedUSD(a.Amount), before.USD(), money.Micros(e.AvailableAfter).USD(), e.ID)})
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// signedUSD is an amount with its sign, for people: "+$25.00", "-$3.50".
func signedUSD(m money.Micros) string {
	if m > 0 {
		return "+" + m.USD()
	}
	return m.USD()
}
