package billing

import (
	"fmt"
	"time"

	"gorm.io/gorm"
)

// An account may watch two thresholds of its available balance (docs/stripe.md): a low-balance e-mail
// and an auto-recharge. Each fires once per crossing, not once per task: the charge that takes available
// under a threshold disarms it and marks its work due, in the charge's own transaction (so the crossing
// and the charge commit or vanish together); the e-mail and the card charge then happen in a background
// job, never inside a request. A credit that lifts available back to the threshold re-arms it.

// watchBalance notes a crossing after available went down. It is one UPDATE that matches no row unless a
// threshold is armed and now crossed, which is what every settle of an account without alerts costs.
// Only a charge for a video may start an auto-recharge: money Stripe gave back (a refund, a dispute) or
// a staff correction must never make us charge the customer's card again at once. They may still send
// the low-balance e-mail.
func watchBalance(tx *gorm.DB, accountID int64, now time.Time, mayRecharge bool) error {
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
		WHERE account_id = ? AND (`+lowCrossed+` OR `+rechargeCrossed+`)`, now, accountID).Error
	if err != nil {
		return fmt.Errorf("watch the balance alerts of account %d: %w", accountID, err)
	}
	return nil
}

// rearmAlerts re-arms the thresholds that available has climbed back to after a credit.
func rearmAlerts(tx *gorm.DB, accountID int64, now time.Time) error {
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
