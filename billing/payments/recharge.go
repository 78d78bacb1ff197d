package payments

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/infra/ids"
	"videogen/internal/money"
	"videogen/models"
)

// Alerts are the balance thresholds a customer sets on the wallet page.
type Alerts struct {
	LowBalance      money.Micros // e-mail when available first drops under this (0: off)
	RechargeEnabled bool
	RechargeBelow   money.Micros // when available falls below this ...
	RechargeAmount  money.Micros // ... charge the saved card this much
}

// ErrNoCard is returned when auto-recharge is switched on without a saved card.
var ErrNoCard = errors.New("save a card with a top-up first")

// SaveAlerts stores the thresholds. Each starts armed, so the next charge that leaves available under one
// fires it.
func (s *Service) SaveAlerts(ctx context.Context, accountID int64, a Alerts) error {
	now := s.now().UTC()
	return s.tx(ctx, func(tx *gorm.DB) error {
		if err := topups.EnsureProfile(tx, accountID, now); err != nil {
			return err
		}
		var p models.BillingProfile
		if err := tx.Where("account_id = ?", accountID).Take(&p).Error; err != nil {
			return err
		}
		if a.RechargeEnabled && p.PaymentMethodID == "" {
			return ErrNoCard
		}
		return topups.SetThresholds(tx, accountID, topups.Thresholds{LowBalance: int64(a.LowBalance), RechargeEnabled: a.RechargeEnabled,
			RechargeBelow: int64(a.RechargeBelow), RechargeAmount: int64(a.RechargeAmount)}, now)
	})
}

// recipients returns who hears about an account's money: the member who paid, else its verified
// members whose role handles the money (owners and billing, docs/members.md); never a removed member.
func recipients(tx *gorm.DB, accountID int64, userID *int64) ([]string, error) {
	var emails []string
	q := tx.Model(&models.User{}).Where("account_id = ? AND email_verified_at IS NOT NULL AND removed_at IS NULL", accountID)
	if userID != nil {
		q = q.Where("id = ?", *userID)
	} else {
		q = q.Where("account_role IN ?", []string{models.AccountOwner, models.AccountBilling})
	}
	if err := q.Order("id").Pluck("email", &emails).Error; err != nil {
		return nil, fmt.Errorf("read recipients of account %d: %w", accountID, err)
	}
	if len(emails) == 0 && userID != nil {
		return recipients(tx, accountID, nil)
	}
	return emails, nil
}

func (s *Service) walletURL() string { return s.cfg.PublicBaseURL + "/console/wallet" }

// switchRechargeOff turns auto-recharge off with a reason and tells the customer, in tx.
func (s *Service) switchRechargeOff(tx *gorm.DB, accountID int64, why string) error {
	if off, err := topups.SwitchRechargeOff(tx, accountID, why, s.now().UTC()); err != nil || !off {
		return err
	}
	to, err := recipients(tx, accountID, nil)
	if err != nil {
		return err
	}
	for _, addr := range to {
		if err := s.notify.RechargeOff(tx, addr, why, s.walletURL()); err != nil {
			return err
		}
	}
	return nil
}

// failRecharge ends a declined auto-recharge: the top-up fails and auto-recharge switches off with an
// e-mail — once, by the transaction that moves the top-up out of pending.
func (s *Service) failRecharge(tx *gorm.DB, t *models.Topup, reason string) error {
	if failed, err := topups.Fail(tx, t.ID, reason, s.now().UTC()); err != nil || !failed {
		return err
	}
	return s.switchRechargeOff(tx, t.AccountID, fmt.Sprintf("We tried to charge your saved card %s automatically, and the payment failed: %s.",
		money.Micros(t.AmountMicros).USD(), strings.TrimSuffix(reason, ".")))
}

// CheckBalances turns the balance crossings that charges left due into their low-balance e-mails and,
// where card payments are on, their auto-recharges: the periodic balance_alerts job, which a test may
// also run at once. Failures are logged; the next run tries again.
func (s *Service) CheckBalances(ctx context.Context) {
	s.warnLowBalances(ctx)
	if s.Enabled() {
		s.startRecharges(ctx)
	}
}

// startRecharges turns each due crossing into one auto-recharge top-up and its charge job, unless the
// account had RechargeCap of them in the last 24 hours: then auto-recharge switches off instead (a loop
// guard).
func (s *Service) startRecharges(ctx context.Context) {
	var due []int64
	if err := s.db.R.WithContext(ctx).Model(&models.BillingProfile{}).Where("recharge_due").Limit(50).Pluck("account_id", &due).Error; err != nil {
		s.log.Warn("list due auto-recharges", "err", err)
		return
	}
	for _, acct := range due {
		now := s.now().UTC()
		err := s.tx(ctx, func(tx *gorm.DB) error {
			if taken, err := topups.TakeRechargeDue(tx, acct, now); err != nil || !taken {
				return err // or another instance took it
			}
			var p models.BillingProfile
			if err := tx.Where("account_id = ?", acct).Take(&p).Error; err != nil {
				return err
			}
			if !p.RechargeEnabled || p.RechargeAmountMicros <= 0 {
				return nil
			}
			if p.PaymentMethodID == "" {
				return s.switchRechargeOff(tx, acct, "There is no saved card to charge.")
			}
			var a models.Account
			if err := tx.Take(&a, acct).Error; err != nil {
				return err
			}
			if a.AvailableMicros >= p.RechargeBelowMicros {
				// Funds arrived since the crossing (a top-up): nothing to charge; the rule is armed again.
				return topups.RearmRecharge(tx, acct)
			}
			var recent int64
			if err := tx.Model(&models.Topup{}).Where("account_id = ? AND source = ? AND created_at > ?", acct,
				models.TopupAutoRecharge, now.Add(-24*time.Hour)).Count(&recent).Error; err != nil {
				return err
			}
			if recent >= int64(s.cfg.RechargeCap) {
				s.log.Warn("auto-recharge cap reached", "account", acct, "in_24h", recent)
				return s.switchRechargeOff(tx, acct, fmt.Sprintf("We tried to recharge your wallet %d times in 24 hours, the most we try automatically.", recent))
			}
			t := &models.Topup{ID: ids.NewTopupID(), AccountID: acct, Source: models.TopupAutoRecharge,
				State: models.TopupPending, AmountMicros: p.RechargeAmountMicros, CreatedAt: now, UpdatedAt: now}
			if err := topups.Create(tx, t); err != nil {
				return err
			}
			_, err := s.queue.InsertTx(tx, rechargeArgs{TopupID: t.ID}, nil)
			return err
		})
		if err != nil {
			s.log.Error("start auto-recharge", "account", acct, "err", err)
		}
	}
}

// chargeRecharge creates the off-session PaymentIntent of an auto-recharge, the work of its charge job:
// one per top-up, by its idempotency key, however often it is retried. The wallet is credited only by
// the payment_intent.succeeded webhook.
func (s *Service) chargeRecharge(ctx context.Context, t *models.Topup) error {
	p, err := s.Profile(ctx, t.AccountID)
	if err != nil {
		return err
	}
	if p.StripeCustomerID == nil || p.PaymentMethodID == "" {
		return s.tx(ctx, func(tx *gorm.DB) error { return s.failRecharge(tx, t, "no saved card") })
	}
	params := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(cents(money.Micros(t.AmountMicros))), Currency: stripe.String(string(stripe.CurrencyUSD)),
		Customer: stripe.String(*p.StripeCustomerID), PaymentMethod: stripe.String(p.PaymentMethodID),
		OffSession: stripe.Bool(true), Confirm: stripe.Bool(true),
		Description: stripe.String("videogen wallet auto-recharge"),
		Metadata:    map[string]string{"topup_id": t.ID, "account_id": strconv.FormatInt(t.AccountID, 10), "source": models.TopupAutoRecharge},
	}
	params.Context = ctx
	params.SetIdempotencyKey("videogen-recharge-" + t.ID)
	pi, err := s.stripe.PaymentIntents.New(params)
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.Type == stripe.ErrorTypeCard {
		// Declined at once (the webhook will say so too; whichever comes first ends the top-up).
		return s.tx(ctx, func(tx *gorm.DB) error {
			if id := paymentIntentID(serr.PaymentIntent); id != nil {
				if err := topups.LinkPayment(tx, t.ID, *id, s.now().UTC()); err != nil {
					return err
				}
			}
			return s.failRecharge(tx, t, serr.Msg)
		})
	}
	if err != nil {
		return stripeFailure("create auto-recharge payment", err)
	}
	return topups.LinkPayment(s.db.W.WithContext(ctx), t.ID, pi.ID, s.now().UTC())
}

// warnLowBalances sends each due low-balance warning once.
func (s *Service) warnLowBalances(ctx context.Context) {
	var due []int64
	if err := s.db.R.WithContext(ctx).Model(&models.BillingProfile{}).Where("low_balance_due").Limit(50).Pluck("account_id", &due).Error; err != nil {
		s.log.Warn("list due low-balance warnings", "err", err)
		return
	}
	for _, acct := range due {
		err := s.tx(ctx, func(tx *gorm.DB) error {
			if taken, err := topups.TakeLowBalanceDue(tx, acct); err != nil || !taken {
				return err
			}
			var p models.BillingProfile
			var a models.Account
			if err := tx.Where("account_id = ?", acct).Take(&p).Error; err != nil {
				return err
			}
			if err := tx.Take(&a, acct).Error; err != nil {
				return err
			}
			to, err := recipients(tx, acct, nil)
			if err != nil {
				return err
			}
			for _, addr := range to {
				if err := s.notify.LowBalance(tx, addr, money.Micros(a.AvailableMicros).USD(), money.Micros(p.LowBalanceMicros).USD(), s.walletURL()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			s.log.Error("send low-balance warning", "account", acct, "err", err)
		}
	}
}
