package topups

import (
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/models"
)

// An account's billing profile holds its Stripe customer, its saved card and two balance thresholds
// (docs/stripe.md): a low-balance e-mail and an auto-recharge. Each threshold fires once per crossing,
// not once per task: the charge that takes available under it disarms it and marks its work due, in the
// charge's own transaction (so the crossing and the charge commit or vanish together); the e-mail and the
// card charge then happen in a background job, never inside a request. A credit that lifts available
// back to the threshold re-arms it.

// EnsureProfile creates the account's billing profile if it has none: both thresholds armed, and off.
func EnsureProfile(tx *gorm.DB, accountID int64, now time.Time) error {
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&models.BillingProfile{AccountID: accountID,
		LowBalanceArmed: true, RechargeArmed: true, UpdatedAt: now}).Error; err != nil {
		return fmt.Errorf("create the billing profile of account %d: %w", accountID, err)
	}
	return nil
}

// SetCustomer records the account's Stripe customer, unless one is recorded already (two first top-ups
// at once: the first stored wins, and both used the same customer by its idempotency key).
func SetCustomer(tx *gorm.DB, accountID int64, customerID string, now time.Time) error {
	if err := tx.Exec("UPDATE billing_profiles SET stripe_customer_id = ?, updated_at = ? WHERE account_id = ? AND stripe_customer_id IS NULL",
		customerID, now, accountID).Error; err != nil {
		return fmt.Errorf("record the Stripe customer of account %d: %w", accountID, err)
	}
	return nil
}

// SaveCard keeps the card a top-up was paid with, for auto-recharge.
func SaveCard(tx *gorm.DB, accountID int64, paymentMethodID, label string, now time.Time) error {
	if err := tx.Exec("UPDATE billing_profiles SET payment_method_id = ?, card_label = ?, updated_at = ? WHERE account_id = ?",
		paymentMethodID, label, now, accountID).Error; err != nil {
		return fmt.Errorf("save the card of account %d: %w", accountID, err)
	}
	return nil
}

// Thresholds are what a customer sets on the wallet page, in micro-dollars.
type Thresholds struct {
	LowBalance      int64 // e-mail when available first drops under this (0: off)
	RechargeEnabled bool
	RechargeBelow   int64 // when available falls below this ...
	RechargeAmount  int64 // ... charge the saved card this much
}

// SetThresholds stores the thresholds, each armed and nothing due, so the next charge that leaves
// available under one fires it.
func SetThresholds(tx *gorm.DB, accountID int64, t Thresholds, now time.Time) error {
	err := tx.Model(&models.BillingProfile{}).Where("account_id = ?", accountID).Updates(map[string]any{
		"low_balance_micros": t.LowBalance, "low_balance_armed": true, "low_balance_due": false,
		"recharge_enabled": t.RechargeEnabled, "recharge_below_micros": t.RechargeBelow,
		"recharge_amount_micros": t.RechargeAmount, "recharge_armed": true, "recharge_due": false,
		"recharge_off_reason": "", "updated_at": now,
	}).Error
	if err != nil {
		return fmt.Errorf("save the balance alerts of account %d: %w", accountID, err)
	}
	return nil
}

// SwitchRechargeOff turns auto-recharge off and says why; false when it was off already.
func SwitchRechargeOff(tx *gorm.DB, accountID int64, why string, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE billing_profiles SET recharge_enabled = ?, recharge_due = ?, recharge_off_reason = ?, updated_at = ? WHERE account_id = ? AND recharge_enabled",
		false, false, why, now, accountID)
	if res.Error != nil {
		return false, fmt.Errorf("switch auto-recharge off for account %d: %w", accountID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// TakeRechargeDue takes an auto-recharge that a crossing made due; false when another instance took it.
func TakeRechargeDue(tx *gorm.DB, accountID int64, now time.Time) (bool, error) {
	res := tx.Exec("UPDATE billing_profiles SET recharge_due = ?, updated_at = ? WHERE account_id = ? AND recharge_due", false, now, accountID)
	if res.Error != nil {
		return false, fmt.Errorf("take the auto-recharge of account %d: %w", accountID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// RearmRecharge arms auto-recharge again without charging (the balance was back above its threshold by
// the time the job looked).
func RearmRecharge(tx *gorm.DB, accountID int64) error {
	if err := tx.Exec("UPDATE billing_profiles SET recharge_armed = ? WHERE account_id = ? AND NOT recharge_armed", true, accountID).Error; err != nil {
		return fmt.Errorf("re-arm the auto-recharge of account %d: %w", accountID, err)
	}
	return nil
}

// TakeLowBalanceDue takes a low-balance e-mail that a crossing made due; false when another instance
// took it.
func TakeLowBalanceDue(tx *gorm.DB, accountID int64) (bool, error) {
	res := tx.Exec("UPDATE billing_profiles SET low_balance_due = ? WHERE account_id = ? AND low_balance_due", false, accountID)
	if res.Error != nil {
		return false, fmt.Errorf("take the low-balance warning of account %d: %w", accountID, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// BalanceFell notes a crossing after available went down, in the transaction that took it down. It is
// one UPDATE that matches no row unless a threshold is armed and now crossed, which is what every settle
// of an account without alerts costs. Only a charge for a video may start an auto-recharge (mayRecharge):
// money Stripe gave back (a refund, a dispute) or a staff correction must never make us charge the
// customer's card again at once. They may still send the low-balance e-mail.
func BalanceFell(tx *gorm.DB, accountID int64, now time.Time, mayRecharge bool) error {
	return BalancesFell(tx, []int64{accountID}, now, mayRecharge)
}

// BalancesFell is BalanceFell for several accounts at once, in one UPDATE.
func BalancesFell(tx *gorm.DB, accountIDs []int64, now time.Time, mayRecharge bool) error {
	const avail = "(SELECT available_micros FROM accounts WHERE id = billing_profiles.account_id)"
	const lowCrossed = "(low_balance_armed AND low_balance_micros > 0 AND low_balance_micros > " + avail + ")"
	rechargeCrossed := "(recharge_enabled AND recharge_armed AND recharge_below_micros > " + avail + ")"
	if !mayRecharge {
		rechargeCrossed = "(1 = 0)"
	}
	err := tx.Exec(`UPDATE billing_profiles SET
		low_balance_due = low_balance_due OR `+lowCrossed+`,
		low_balance_armed = low_balance_armed AND NOT `+lowCrossed+`,
		recharge_due = recharge_due OR `+rechargeCrossed+`,
		recharge_armed = recharge_armed AND NOT `+rechargeCrossed+`,
		updated_at = ?
		WHERE account_id IN ? AND (`+lowCrossed+` OR `+rechargeCrossed+`)`, now, accountIDs).Error
	if err != nil {
		return fmt.Errorf("watch the balance alerts of accounts %v: %w", accountIDs, err)
	}
	return nil
}

// BalanceRose re-arms the thresholds that available has climbed back to, in the transaction of the
// credit that lifted it.
func BalanceRose(tx *gorm.DB, accountID int64, now time.Time) error {
	const avail = "(SELECT available_micros FROM accounts WHERE id = billing_profiles.account_id)"
	err := tx.Exec(`UPDATE billing_profiles SET
		low_balance_armed = low_balance_armed OR low_balance_micros <= `+avail+`,
		recharge_armed = recharge_armed OR recharge_below_micros <= `+avail+`,
		updated_at = ?
		WHERE account_id = ? AND ((NOT low_balance_armed AND low_balance_micros <= `+avail+`)
			OR (NOT recharge_armed AND recharge_below_micros <= `+avail+`))`, now, accountID).Error
	if err != nil {
		return fmt.Errorf("re-arm the balance alerts of account %d: %w", accountID, err)
	}
	return nil
}
