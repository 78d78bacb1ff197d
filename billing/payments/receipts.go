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

// sendReceipt e-mails the receipt of a credited top-up, the work of its receipt job. It first asks
// Stripe for the payment (its receipt link, and the card when the customer chose to save it); while
// Stripe cannot be reached it fails, to be retried, and after ten minutes the receipt goes without the
// link. One per top-up: the transaction that clears receipt_due queues the e-mail.
func (s *Service) sendReceipt(ctx context.Context, topupID string) error {
	var t models.Topup
	if err := s.db.R.WithContext(ctx).Where("id = ?", topupID).Take(&t).Error; err != nil {
		return fmt.Errorf("read top-up %s for its receipt: %w", topupID, err)
	}
	if !t.ReceiptDue {
		return nil // sent
	}
	pi, err := s.payment(ctx, &t)
	if err != nil && t.CreditedAt != nil && s.now().Sub(*t.CreditedAt) < 10*time.Minute {
		s.log.Warn("receipt waits for Stripe", "topup", t.ID, "err", err)
		return err
	}
	if err := s.tx(ctx, func(tx *gorm.DB) error { return s.writeReceipt(tx, &t, pi) }); err != nil {
		return fmt.Errorf("send the receipt of top-up %s: %w", t.ID, err)
	}
	return nil
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

// writeReceipt records the receipt sent and queues its e-mail, in tx: nothing if it was sent already.
func (s *Service) writeReceipt(tx *gorm.DB, t *models.Topup, pi *stripe.PaymentIntent) error {
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
