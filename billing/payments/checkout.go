package payments

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/stripe/stripe-go/v76"
	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/infra/ids"
	"videogen/internal/money"
	"videogen/models"
)

// ErrAmount is returned for a top-up amount outside the bounds or not in whole cents.
var ErrAmount = errors.New("the amount is outside the allowed range or not in whole cents")

// Checkout is a customer's request to add funds with a card.
type Checkout struct {
	AccountID int64
	UserID    int64
	Email     string
	Amount    money.Micros
	SaveCard  bool // keep the card for auto-recharge (setup_future_usage=off_session)
}

// StartCheckout writes a pending top-up and creates its Stripe Checkout Session; the customer pays on the
// session's page, whose address it returns. It credits nothing: the webhook does, once Stripe says the
// money is collected.
func (s *Service) StartCheckout(ctx context.Context, c Checkout) (topupID, url string, err error) {
	if !s.Enabled() {
		return "", "", ErrNotConfigured
	}
	if c.Amount < s.cfg.MinTopup || c.Amount > s.cfg.MaxTopup || int64(c.Amount)%microsPerCent != 0 {
		return "", "", ErrAmount
	}
	now := s.now().UTC()
	t := &models.Topup{ID: ids.NewTopupID(), AccountID: c.AccountID, UserID: &c.UserID, Source: models.TopupCheckout,
		State: models.TopupPending, AmountMicros: int64(c.Amount), SaveCard: c.SaveCard, CreatedAt: now, UpdatedAt: now}
	if err := topups.Create(s.db.W.WithContext(ctx), t); err != nil {
		return "", "", err
	}
	customer, err := s.customer(ctx, c.AccountID, c.Email)
	var sess *stripe.CheckoutSession
	if err == nil {
		sess, err = s.createSession(ctx, t, customer)
	}
	if err != nil {
		// Nothing can be paid for a session that does not exist: the top-up is over, and says why.
		_, _ = topups.Fail(s.db.W.WithContext(ctx), t.ID, "Stripe could not be reached; nothing was charged", now)
		s.log.Error("start checkout", "topup", t.ID, "account", c.AccountID, "err", err)
		return t.ID, "", fmt.Errorf("%w: %v", ErrStripeUnavailable, err)
	}
	// The session exists and can be paid. Its id is stored to find the top-up by, but the session names
	// the top-up itself (client_reference_id and metadata), and the webhook and reconciliation find it
	// that way when the id is missing (as after a crash right here). So a failure to store it changes
	// nothing for the customer: the top-up stays pending, and the payment goes ahead.
	if err := topups.LinkSession(s.db.W.WithContext(ctx), t.ID, sess.ID, s.now().UTC()); err != nil {
		s.log.Error("checkout session created but not stored; its webhook will link it to the top-up", "topup", t.ID,
			"session", sess.ID, "account", c.AccountID, "err", err)
	}
	return t.ID, sess.URL, nil
}

// createSession creates the top-up's Checkout Session on Stripe.
func (s *Service) createSession(ctx context.Context, t *models.Topup, customer string) (*stripe.CheckoutSession, error) {
	meta := map[string]string{"topup_id": t.ID, "account_id": strconv.FormatInt(t.AccountID, 10), "source": models.TopupCheckout}
	p := &stripe.CheckoutSessionParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		Customer:          stripe.String(customer),
		ClientReferenceID: stripe.String(t.ID),
		LineItems: []*stripe.CheckoutSessionLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionLineItemPriceDataParams{
				Currency:   stripe.String(string(stripe.CurrencyUSD)),
				UnitAmount: stripe.Int64(cents(money.Micros(t.AmountMicros))),
				ProductData: &stripe.CheckoutSessionLineItemPriceDataProductDataParams{
					Name:        stripe.String("videogen wallet top-up"),
					Description: stripe.String("Prepaid balance for video generation, in US dollars"),
				},
			},
		}},
		PaymentIntentData: &stripe.CheckoutSessionPaymentIntentDataParams{Metadata: meta},
		SuccessURL:        stripe.String(s.cfg.PublicBaseURL + "/console/wallet/topups/" + t.ID),
		CancelURL:         stripe.String(s.cfg.PublicBaseURL + "/console/wallet/topups/" + t.ID + "/canceled"),
	}
	if t.SaveCard {
		p.PaymentIntentData.SetupFutureUsage = stripe.String(string(stripe.PaymentIntentSetupFutureUsageOffSession))
	}
	p.Metadata = meta
	// The wallet holds US dollars: Stripe's Adaptive Pricing would let the customer pay in their own
	// currency and report the session's amount in it. Off, whatever the Dashboard says.
	p.AddExtra("adaptive_pricing[enabled]", "false")
	p.Context = ctx
	// One session per top-up, however often this request is retried.
	p.SetIdempotencyKey("videogen-checkout-" + t.ID)
	sess, err := s.stripe.CheckoutSessions.New(p)
	if err != nil {
		return nil, stripeFailure("create checkout session", err)
	}
	return sess, nil
}

// customer returns the account's Stripe Customer, creating it the first time. Two first top-ups at once
// share one: the create carries an idempotency key per account, and the id is stored only if none is.
func (s *Service) customer(ctx context.Context, accountID int64, email string) (string, error) {
	var p models.BillingProfile
	err := s.db.R.WithContext(ctx).Where("account_id = ?", accountID).Limit(1).Find(&p).Error
	if err != nil {
		return "", fmt.Errorf("read billing profile: %w", err)
	}
	if p.StripeCustomerID != nil && *p.StripeCustomerID != "" {
		return *p.StripeCustomerID, nil
	}
	params := &stripe.CustomerParams{Email: stripe.String(email),
		Metadata: map[string]string{"account_id": strconv.FormatInt(accountID, 10)}}
	params.Context = ctx
	// One key per account and e-mail: two users of one account starting their first top-up at once must
	// not collide on one key with different parameters (the second customer is then left unused).
	params.SetIdempotencyKey("videogen-customer-" + strconv.FormatInt(accountID, 10) + "-" + email)
	cus, err := s.stripe.Customers.New(params)
	if err != nil {
		return "", stripeFailure("create Stripe customer", err)
	}
	now := s.now().UTC()
	err = s.tx(ctx, func(tx *gorm.DB) error {
		if err := topups.EnsureProfile(tx, accountID, now); err != nil {
			return err
		}
		if err := topups.SetCustomer(tx, accountID, cus.ID, now); err != nil {
			return err
		}
		return tx.Where("account_id = ?", accountID).Take(&p).Error
	})
	if err != nil {
		return "", fmt.Errorf("store Stripe customer: %w", err)
	}
	return *p.StripeCustomerID, nil
}
