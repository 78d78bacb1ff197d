package payments

import (
	"context"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76"
	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/money"
	"videogen/models"
)

// sendReceipts e-mails a receipt for each credited top-up that has none yet. It first asks Stripe for the
// payment (its receipt link, and the card when the customer chose to save it); if Stripe cannot be
// reached for ten minutes the receipt goes without the link. One per top-up: the transaction that clears
// receipt_due queues the e-mail.
func (s *Service) sendReceipts(ctx context.Context) {
	now := s.now().UTC()
	var ts []models.Topup
	if err := s.db.R.WithContext(ctx).Where("receipt_due AND next_attempt_at <= ?", now).Limit(20).Find(&ts).Error; err != nil {
		s.log.Warn("list receipts to send", "err", err)
		return
	}
	for i := range ts {
		t := &ts[i]
		if !s.claimTopup(ctx, t, now) {
			continue
		}
		pi, err := s.payment(ctx, t)
		if err != nil && t.CreditedAt != nil && now.Sub(*t.CreditedAt) < 10*time.Minute {
			s.log.Warn("receipt waits for Stripe", "topup", t.ID, "err", err)
			_ = topups.RetryReceipt(s.db.W.WithContext(ctx), t.ID, now.Add(backoff(t.Attempts)/2))
			continue
		}
		if err := s.tx(ctx, func(tx *gorm.DB) error { return s.sendReceipt(tx, t, pi) }); err != nil {
			s.log.Error("send receipt", "topup", t.ID, "err", err)
			continue
		}
		s.notify.Wake()
	}
}

// claimTopup takes a top-up's due work (a receipt, an auto-recharge charge) for a minute, so that two
// instances never do it at once: the one whose UPDATE still finds the time it read wins.
func (s *Service) claimTopup(ctx context.Context, t *models.Topup, now time.Time) bool {
	claimed, err := topups.Claim(s.db.W.WithContext(ctx), t.ID, t.NextAttemptAt, now.Add(time.Minute))
	return err == nil && claimed
}

// payment reads a top-up's PaymentIntent with its charge and payment method.
func (s *Service) payment(ctx context.Context, t *models.Topup) (*stripe.PaymentIntent, error) {
	if t.StripePaymentIntentID == nil || !s.Enabled() {
		return nil, nil
	}
	p := &stripe.PaymentIntentParams{}
	p.Context = ctx
	p.AddExpand("latest_charge")
	p.AddExpand("payment_method")
	pi, err := s.stripe.PaymentIntents.Get(*t.StripePaymentIntentID, p)
	if err != nil {
		return nil, stripeFailure("read payment "+*t.StripePaymentIntentID, err)
	}
	return pi, nil
}

func (s *Service) sendReceipt(tx *gorm.DB, t *models.Topup, pi *stripe.PaymentIntent) error {
	receiptURL := ""
	if pi != nil && pi.LatestCharge != nil {
		receiptURL = pi.LatestCharge.ReceiptURL
	}
	now := s.now().UTC()
	if sent, err := topups.ReceiptSent(tx, t.ID, receiptURL, now); err != nil || !sent {
		return err
	}
	if t.SaveCard && pi != nil && pi.PaymentMethod != nil && pi.PaymentMethod.ID != "" {
		label := "saved card"
		if c := pi.PaymentMethod.Card; c != nil {
			label = fmt.Sprintf("%s ending in %s", c.Brand, c.Last4)
		}
		if err := topups.EnsureProfile(tx, t.AccountID, now); err != nil {
			return err
		}
		if err := topups.SaveCard(tx, t.AccountID, pi.PaymentMethod.ID, label, now); err != nil {
			return err
		}
	}
	// The balance right after this credit, from its own ledger entry.
	var e models.LedgerEntry
	external := t.ID
	if t.StripeSessionID != nil {
		external = *t.StripeSessionID
	} else if t.StripePaymentIntentID != nil {
		external = *t.StripePaymentIntentID
	}
	if err := tx.Where("kind = ? AND external_id = ?", models.KindTopup, external).Take(&e).Error; err != nil {
		return fmt.Errorf("read the credit of top-up %s: %w", t.ID, err)
	}
	to, err := recipients(tx, t.AccountID, t.UserID)
	if err != nil {
		return err
	}
	for _, addr := range to {
		if err := s.notify.Receipt(tx, addr, money.Micros(e.DeltaAvailable).USD(), money.Micros(e.AvailableAfter).USD(), receiptURL, s.walletURL()); err != nil {
			return err
		}
	}
	return nil
}
