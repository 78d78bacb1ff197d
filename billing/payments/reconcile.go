package payments

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"gorm.io/gorm"

	"videogen/internal/money"
	"videogen/models"
)

// Kinds of reconciliation difference.
const (
	DiffUncredited = "paid_not_credited"  // Stripe collected it; the wallet was never credited
	DiffNoTopup    = "paid_unknown_topup" // a paid session or payment names a top-up we have no row for
	DiffAmount     = "amount_differs"     // credited, but not what Stripe reports collected
	DiffNotPaid    = "credited_not_paid"  // credited, but Stripe lists no paid payment for it
	DiffFlagged    = "flagged_for_staff"  // credited and matching, but flagged when it was (see the top-up)
)

// Difference is one way our records and Stripe's disagree.
type Difference struct {
	Kind         string
	StripeID     string // Checkout Session or PaymentIntent id
	TopupID      string
	AccountID    int64
	StripeAmount money.Micros
	Credited     money.Micros
	Note         string
	Applied      bool // --apply credited it now
}

// Report is the outcome of one reconciliation.
type Report struct {
	Since          time.Time
	Sessions       int // paid Checkout Sessions of videogen's listed
	PaymentIntents int // succeeded auto-recharge PaymentIntents listed
	Differences    []Difference
}

// Reconcile compares Stripe's paid Checkout Sessions and succeeded auto-recharge PaymentIntents created
// since `since` with the credited top-ups of the same period, through Stripe's list API (every page).
// With apply, a payment whose webhook never arrived is credited through the same exactly-once path as the
// webhook. Payments not made by videogen (no top-up in their metadata) are not ours and are skipped. A
// run that completes is recorded (record); one that fails part-way records nothing.
func (s *Service) Reconcile(ctx context.Context, since time.Time, apply bool) (*Report, error) {
	if !s.Enabled() {
		return nil, ErrNotConfigured
	}
	r := &Report{Since: since}
	seen := map[string]bool{}

	sp := &stripe.CheckoutSessionListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	sp.Context = ctx
	sp.Limit = stripe.Int64(100)
	it := s.stripe.CheckoutSessions.List(sp)
	for it.Next() {
		sess := it.CheckoutSession()
		if sess.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid || (sess.Metadata["topup_id"] == "" && sess.ClientReferenceID == "") {
			continue
		}
		r.Sessions++
		seen[sess.ID] = true
		// What the webhook would credit: the USD amount, also when Adaptive Pricing charged another currency.
		amount, currency := sessionUSD(sess)
		if err := s.reconcileOne(ctx, r, sess.ID, amount, currency, apply, func(tx *gorm.DB) (*models.Topup, error) {
			return topupOfSession(tx, sess, s.now().UTC())
		}, func(tx *gorm.DB, t *models.Topup) (string, error) {
			return s.creditSession(tx, t, sess, source{api: true}, nil)
		}); err != nil {
			return r, err
		}
	}
	if err := it.Err(); err != nil {
		return r, stripeFailure("list Stripe checkout sessions", err)
	}

	pp := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	pp.Context = ctx
	pp.Limit = stripe.Int64(100)
	pit := s.stripe.PaymentIntents.List(pp)
	for pit.Next() {
		pi := pit.PaymentIntent()
		if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.Metadata["source"] != models.TopupAutoRecharge {
			continue
		}
		r.PaymentIntents++
		seen[pi.ID] = true
		if err := s.reconcileOne(ctx, r, pi.ID, pi.AmountReceived, pi.Currency, apply, func(tx *gorm.DB) (*models.Topup, error) {
			t, err := findTopup(tx, "stripe_payment_intent_id = ? AND source = ?", pi.ID, models.TopupAutoRecharge)
			if err == nil && t == nil && pi.Metadata["topup_id"] != "" {
				t, err = findTopup(tx, "id = ? AND source = ?", pi.Metadata["topup_id"], models.TopupAutoRecharge)
			}
			return t, err
		}, func(tx *gorm.DB, t *models.Topup) (string, error) {
			return s.creditTopup(tx, t, pi.ID, pi.AmountReceived, pi.Currency, &pi.ID, source{api: true})
		}); err != nil {
			return r, err
		}
	}
	if err := pit.Err(); err != nil {
		return r, stripeFailure("list Stripe payment intents", err)
	}

	// Our side: everything credited in the period must be among Stripe's paid payments.
	var credited []models.Topup
	if err := s.db.R.WithContext(ctx).Where("state = ? AND created_at >= ?", models.TopupCredited, since.UTC()).
		Order("created_at").Find(&credited).Error; err != nil {
		return r, fmt.Errorf("list credited top-ups: %w", err)
	}
	for _, t := range credited {
		id := ""
		if t.Source == models.TopupCheckout && t.StripeSessionID != nil {
			id = *t.StripeSessionID
		} else if t.StripePaymentIntentID != nil {
			id = *t.StripePaymentIntentID
		}
		if !seen[id] {
			r.Differences = append(r.Differences, Difference{Kind: DiffNotPaid, StripeID: id, TopupID: t.ID, AccountID: t.AccountID,
				Credited: money.Micros(t.CreditedMicros), Note: "credited, but Stripe lists no paid payment for it in the period"})
		}
	}
	if err := s.record(ctx, r); err != nil {
		return r, err
	}
	return r, nil
}

// maxReconcileDetail bounds the detail a run keeps: the first differences say enough, and the command
// lists them all.
const maxReconcileDetail = 100

// record keeps the outcome of a completed run in stripe_reconcile_runs, so /metrics (and through it an
// alert) sees the differences the run otherwise only logs or prints. The differences --apply credited
// are resolved and not counted.
func (s *Service) record(ctx context.Context, r *Report) error {
	row := models.StripeReconcileRun{At: s.now().UTC().Truncate(time.Microsecond), Owner: s.cfg.Owner, Since: r.Since.UTC(),
		Sessions: r.Sessions, PaymentIntents: r.PaymentIntents}
	lines := make([]string, 0, min(len(r.Differences), maxReconcileDetail)+1)
	for _, d := range r.Differences {
		if d.Applied {
			row.Applied++
			continue
		}
		row.Differences++
		if len(lines) == maxReconcileDetail {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s %s top-up %q account %d: %s", d.Kind, d.StripeID, d.TopupID, d.AccountID, d.Note))
	}
	if row.Differences > len(lines) {
		lines = append(lines, fmt.Sprintf("… and %d more (videogen stripe reconcile lists them all)", row.Differences-len(lines)))
	}
	row.Detail = strings.Join(lines, "\n")
	if err := s.db.W.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("record the reconciliation: %w", err)
	}
	return nil
}

func (s *Service) reconcileOne(ctx context.Context, r *Report, stripeID string, amountCents int64, currency stripe.Currency, apply bool,
	find func(tx *gorm.DB) (*models.Topup, error), credit func(tx *gorm.DB, t *models.Topup) (string, error)) error {
	amount := fromCents(amountCents)
	var t *models.Topup
	// In a write transaction: finding a session's top-up may record the session id a crash left unstored.
	if err := s.tx(ctx, func(tx *gorm.DB) error {
		var err error
		t, err = find(tx)
		return err
	}); err != nil {
		return fmt.Errorf("reconcile %s: %w", stripeID, err)
	}
	switch {
	case t == nil:
		r.Differences = append(r.Differences, Difference{Kind: DiffNoTopup, StripeID: stripeID, StripeAmount: amount,
			Note: "paid on Stripe, but videogen has no top-up for it: credit the account by hand after checking"})
	case t.CreditedAt == nil && currency != stripe.CurrencyUSD:
		// The webhook came and refused it on purpose: the wallet holds USD only.
		r.Differences = append(r.Differences, Difference{Kind: DiffAmount, StripeID: stripeID, TopupID: t.ID, AccountID: t.AccountID,
			StripeAmount: amount, Note: "paid in " + string(currency) + ", not credited: refund it or credit the account by hand"})
	case t.CreditedAt == nil:
		d := Difference{Kind: DiffUncredited, StripeID: stripeID, TopupID: t.ID, AccountID: t.AccountID, StripeAmount: amount,
			Note: "paid on Stripe, never credited (the webhook did not arrive)"}
		if apply {
			var out string
			err := s.tx(ctx, func(tx *gorm.DB) error {
				fresh, err := find(tx)
				if err != nil || fresh == nil {
					return err
				}
				out, err = credit(tx, fresh)
				return err
			})
			if err != nil {
				return fmt.Errorf("credit %s: %w", stripeID, err)
			}
			d.Applied = out == outcomeCredited
			if d.Applied {
				d.Note += "; credited now"
				s.log.Warn("reconciliation credited a payment whose webhook never arrived", "stripe_id", stripeID, "topup", t.ID)
			}
		}
		r.Differences = append(r.Differences, d)
	case t.CreditedMicros != int64(amount):
		r.Differences = append(r.Differences, Difference{Kind: DiffAmount, StripeID: stripeID, TopupID: t.ID, AccountID: t.AccountID,
			StripeAmount: amount, Credited: money.Micros(t.CreditedMicros), Note: "credited amount differs from what Stripe collected"})
	case t.Flag != "":
		r.Differences = append(r.Differences, Difference{Kind: DiffFlagged, StripeID: stripeID, TopupID: t.ID, AccountID: t.AccountID,
			StripeAmount: amount, Credited: money.Micros(t.CreditedMicros), Note: t.Flag})
	}
	return nil
}
