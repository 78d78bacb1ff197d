// Package topups owns the rows of money coming in: the top-ups (a card payment through Stripe Checkout,
// or an auto-recharge of a saved card) and each account's billing profile (its Stripe customer, saved
// card and balance alerts). Every write of the topups and billing_profiles tables is a function here,
// each guarded by the state it moves from; a test holds every other package to that
// (internal/architecture). Each works inside the caller's transaction, the one that also moves the
// ledger or queues the e-mail the change is about. docs/stripe.md tells the whole story.
package topups

import (
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"

	"videogen/models"
)

// States of a top-up.
const (
	Pending  = models.TopupPending
	Credited = models.TopupCredited
	Failed   = models.TopupFailed
	Expired  = models.TopupExpired
	Canceled = models.TopupCanceled
)

// movesTo lists, for each state, the states a top-up may come to it from. A top-up is credited whenever
// Stripe says it collected the money — even after the customer left its page (canceled) or an earlier
// event said failed or expired: nothing Stripe collected goes uncredited. Nothing leaves credited.
var movesTo = map[string][]string{
	Credited: {Pending, Canceled, Failed, Expired},
	Failed:   {Pending, Canceled},
	Expired:  {Pending, Canceled},
	Canceled: {Pending},
}

// CanMove reports whether a top-up may go from one state to another.
func CanMove(from, to string) bool { return slices.Contains(movesTo[to], from) }

// Final reports whether a top-up in state will never change again.
func Final(state string) bool { return state == Credited }

// Create records a new top-up, pending.
func Create(tx *gorm.DB, t *models.Topup) error {
	if t.State != Pending {
		return fmt.Errorf("a new top-up is pending, not %s", t.State)
	}
	if err := tx.Create(t).Error; err != nil {
		return fmt.Errorf("record top-up: %w", err)
	}
	return nil
}

// moved runs a guarded move and reports whether this call made it (false: it was not in a state that
// may move to, or another transaction moved it first).
func moved(res *gorm.DB, id, to string) (bool, error) {
	if res.Error != nil {
		return false, fmt.Errorf("move top-up %s to %s: %w", id, to, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// Credit marks a top-up credited with what Stripe collected, once: only the call that stamps credited_at
// may write the ledger's credit. flag is what the credit found for staff ("" when all agree): it replaces
// any earlier flag, so the flag always says what the top-up's current state is. pi is the PaymentIntent
// that paid, kept if none is recorded yet. The receipt becomes due: the caller queues its job in tx.
func Credit(tx *gorm.DB, id string, credited int64, flag string, pi *string, now time.Time) (bool, error) {
	res := tx.Exec(`UPDATE topups SET state = ?, credited_micros = ?, flag = ?,
		stripe_payment_intent_id = COALESCE(stripe_payment_intent_id, ?), receipt_due = ?,
		credited_at = ?, updated_at = ? WHERE id = ? AND credited_at IS NULL AND state IN ?`,
		Credited, credited, flag, pi, true, now, now, id, movesTo[Credited])
	return moved(res, id, Credited)
}

// Fail ends a top-up that was not paid (the payment failed, or Stripe could not be reached to start it),
// saying why.
func Fail(tx *gorm.DB, id, failure string, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE topups SET state = ?, failure = ?, updated_at = ? WHERE id = ? AND state IN ?",
		Failed, failure, now, id, movesTo[Failed])
	return moved(res, id, Failed)
}

// Expire ends a top-up whose Checkout Session expired unpaid.
func Expire(tx *gorm.DB, id string, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE topups SET state = ?, failure = ?, updated_at = ? WHERE id = ? AND state IN ?",
		Expired, "", now, id, movesTo[Expired])
	return moved(res, id, Expired)
}

// Cancel records that the customer left Stripe's page without paying: only an account's own pending
// Checkout top-up changes.
func Cancel(tx *gorm.DB, accountID int64, id string, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE topups SET state = ?, updated_at = ? WHERE id = ? AND account_id = ? AND source = ? AND state IN ?",
		Canceled, now, id, accountID, models.TopupCheckout, movesTo[Canceled])
	return moved(res, id, Canceled)
}

// FlagUncredited notes for staff why a payment Stripe reports was not credited (it is in a currency the
// wallet does not hold), unless a credit has been made meanwhile: that credit's flag stands.
func FlagUncredited(tx *gorm.DB, id, flag string, now time.Time) error {
	if err := tx.Exec("UPDATE topups SET flag = ?, updated_at = ? WHERE id = ? AND credited_at IS NULL", flag, now, id).Error; err != nil {
		return fmt.Errorf("flag top-up %s: %w", id, err)
	}
	return nil
}

// LinkSession records the Checkout Session that pays for a top-up, if none is recorded yet (a crash
// between creating the session and storing its id leaves it to the session's webhook).
func LinkSession(tx *gorm.DB, id, sessionID string, now time.Time) error {
	if err := tx.Exec("UPDATE topups SET stripe_session_id = ?, updated_at = ? WHERE id = ? AND stripe_session_id IS NULL",
		sessionID, now, id).Error; err != nil {
		return fmt.Errorf("record the session of top-up %s: %w", id, err)
	}
	return nil
}

// LinkPayment records the PaymentIntent of a top-up, if none is recorded yet.
func LinkPayment(tx *gorm.DB, id, paymentIntentID string, now time.Time) error {
	if err := tx.Exec("UPDATE topups SET stripe_payment_intent_id = COALESCE(stripe_payment_intent_id, ?), updated_at = ? WHERE id = ?",
		paymentIntentID, now, id).Error; err != nil {
		return fmt.Errorf("record the payment of top-up %s: %w", id, err)
	}
	return nil
}

// ReceiptSent records a receipt sent, once: false when another call sent it first.
func ReceiptSent(tx *gorm.DB, id, receiptURL string, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE topups SET receipt_due = ?, receipt_url = ?, updated_at = ? WHERE id = ? AND receipt_due",
		false, receiptURL, now, id)
	if res.Error != nil {
		return false, fmt.Errorf("record the receipt of top-up %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}
