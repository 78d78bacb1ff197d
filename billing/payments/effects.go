package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v76"
	"gorm.io/gorm"

	"videogen/billing"
	"videogen/billing/topups"
	"videogen/internal/money"
	"videogen/models"
)

// findTopup reads one top-up under tx; nil when none matches.
func findTopup(tx *gorm.DB, where string, args ...any) (*models.Topup, error) {
	var ts []models.Topup
	if err := tx.Where(where, args...).Limit(1).Find(&ts).Error; err != nil {
		return nil, fmt.Errorf("find top-up: %w", err)
	}
	if len(ts) == 0 {
		return nil, nil
	}
	return &ts[0], nil
}

// findSessionTopup finds the top-up a Checkout Session pays for: by the session id stored when it was
// created, or — when the instance crashed between creating the session and storing its id — by the
// top-up id the session carries, if that top-up has no session yet and the account matches (unstored).
func findSessionTopup(tx *gorm.DB, sess *stripe.CheckoutSession) (t *models.Topup, unstored bool, err error) {
	t, err = findTopup(tx, "stripe_session_id = ?", sess.ID)
	if err != nil || t != nil {
		return t, false, err
	}
	id := sess.ClientReferenceID
	if id == "" {
		id = sess.Metadata["topup_id"]
	}
	if id == "" {
		return nil, false, nil
	}
	t, err = findTopup(tx, "id = ? AND stripe_session_id IS NULL AND source = ?", id, models.TopupCheckout)
	if err != nil || t == nil {
		return nil, false, err
	}
	if acct := sess.Metadata["account_id"]; acct != "" && acct != fmt.Sprint(t.AccountID) {
		return nil, false, nil
	}
	return t, true, nil
}

// topupOfSession finds the top-up a Checkout Session pays for (findSessionTopup), and stores the session
// id a crash left unstored.
func topupOfSession(tx *gorm.DB, sess *stripe.CheckoutSession, now time.Time) (*models.Topup, error) {
	t, unstored, err := findSessionTopup(tx, sess)
	if err != nil || !unstored {
		return t, err
	}
	if err := topups.LinkSession(tx, t.ID, sess.ID, now); err != nil {
		return nil, err
	}
	return t, nil
}

// rechargeOf finds the auto-recharge a PaymentIntent pays for: by the PaymentIntent id stored when it was
// created, or by the top-up its metadata names when that top-up has none stored yet (unstored).
func rechargeOf(tx *gorm.DB, pi *stripe.PaymentIntent) (t *models.Topup, unstored bool, err error) {
	t, err = findTopup(tx, "stripe_payment_intent_id = ? AND source = ?", pi.ID, models.TopupAutoRecharge)
	if err != nil || t != nil || pi.Metadata["source"] != models.TopupAutoRecharge || pi.Metadata["topup_id"] == "" {
		return t, false, err
	}
	t, err = findTopup(tx, "id = ? AND source = ? AND stripe_payment_intent_id IS NULL", pi.Metadata["topup_id"], models.TopupAutoRecharge)
	return t, t != nil, err
}

// source says where the amount a credit rests on was read. An event's body is only as trustworthy as
// the webhook secret: an amount other than the top-up's is credited only once Stripe's API confirms it.
type source struct {
	api  bool   // read from Stripe's API: fetched by effectOf, or listed by reconciliation
	said string // what the event's body said, when Stripe's API says otherwise
}

// errUnconfirmed stops a credit of another amount than the top-up's that Stripe's API has not confirmed
// (the top-up was not found when the event was read); the event is tried again, and asks the API then.
var errUnconfirmed = errors.New("the amount differs from the top-up's and Stripe's API has not confirmed it")

// stripeAmount says an amount of Stripe's for a person: dollars, or the smallest unit of another currency.
func stripeAmount(cents int64, currency stripe.Currency) string {
	if currency == stripe.CurrencyUSD {
		return fromCents(cents).USD()
	}
	return fmt.Sprintf("%d %s", cents, currency)
}

// needsConfirming reports whether a credit of cents in currency to t must first be confirmed with
// Stripe's API: t is still to be credited, and the amount is not the one asked.
func needsConfirming(t *models.Topup, cents int64, currency stripe.Currency) bool {
	return t != nil && t.CreditedAt == nil && (currency != stripe.CurrencyUSD || int64(fromCents(cents)) != t.AmountMicros)
}

// confirmSession replaces a session whose event would credit another amount than its top-up asked
// with the session as Stripe's API has it, for the whole effect (payment status, currency, amount).
// The usual event, of the amount asked, costs no call. A failed call leaves the event to be retried.
func (s *Service) confirmSession(ctx context.Context, typ string, sess *stripe.CheckoutSession) (source, error) {
	if (typ != EvSessionCompleted && typ != EvSessionAsyncPaid) || sess.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
		return source{}, nil // credits nothing
	}
	t, _, err := findSessionTopup(s.db.R.WithContext(ctx), sess)
	if err != nil {
		return source{}, err
	}
	cents, currency := sessionUSD(sess)
	if !needsConfirming(t, cents, currency) {
		return source{}, nil
	}
	if !s.Enabled() {
		return source{}, ErrNotConfigured
	}
	p := &stripe.CheckoutSessionParams{}
	p.Context = ctx
	got, err := s.stripe.CheckoutSessions.Get(sess.ID, p)
	if err != nil {
		return source{}, stripeFailure("confirm the amount of checkout session "+sess.ID, err)
	}
	if got.ID != sess.ID {
		return source{}, fmt.Errorf("confirm the amount of checkout session %s: Stripe's API answered session %q", sess.ID, got.ID)
	}
	src := source{api: true}
	if gotCents, gotCurrency := sessionUSD(got); gotCents != cents || gotCurrency != currency || got.PaymentStatus != sess.PaymentStatus {
		src.said = fmt.Sprintf("%s, payment %s", stripeAmount(cents, currency), sess.PaymentStatus)
	}
	*sess = *got
	return src, nil
}

// confirmPaymentIntent is confirmSession for an auto-recharge's payment_intent.succeeded.
func (s *Service) confirmPaymentIntent(ctx context.Context, typ string, pi *stripe.PaymentIntent) (source, error) {
	if typ != EvPaymentIntentPaid {
		return source{}, nil
	}
	t, _, err := rechargeOf(s.db.R.WithContext(ctx), pi)
	if err != nil {
		return source{}, err
	}
	if !needsConfirming(t, pi.AmountReceived, pi.Currency) {
		return source{}, nil
	}
	if !s.Enabled() {
		return source{}, ErrNotConfigured
	}
	p := &stripe.PaymentIntentParams{}
	p.Context = ctx
	got, err := s.stripe.PaymentIntents.Get(pi.ID, p)
	if err != nil {
		return source{}, stripeFailure("confirm the amount of payment intent "+pi.ID, err)
	}
	if got.ID != pi.ID {
		return source{}, fmt.Errorf("confirm the amount of payment intent %s: Stripe's API answered payment intent %q", pi.ID, got.ID)
	}
	src := source{api: true}
	if got.AmountReceived != pi.AmountReceived || got.Currency != pi.Currency || got.Status != pi.Status {
		src.said = fmt.Sprintf("%s, status %s", stripeAmount(pi.AmountReceived, pi.Currency), pi.Status)
	}
	*pi = *got
	return src, nil
}

func paymentIntentID(pi *stripe.PaymentIntent) *string {
	if pi == nil || pi.ID == "" {
		return nil
	}
	return &pi.ID
}

// sessionEffect credits, fails or expires the top-up a Checkout Session pays for; a credit names its
// PaymentIntent in *paid.
func (s *Service) sessionEffect(typ string, sess *stripe.CheckoutSession, src source, paid *string) effect {
	return func(tx *gorm.DB) (string, error) {
		t, err := topupOfSession(tx, sess, s.now().UTC())
		if err != nil {
			return "", err
		}
		if t == nil {
			return "", ignore("no top-up of videogen's has checkout session %s", sess.ID)
		}
		now := s.now().UTC()
		switch typ {
		case EvSessionCompleted, EvSessionAsyncPaid:
			if sess.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid {
				// A delayed payment method: the money is not collected yet (so Stripe's API said, when
				// asked). async_payment_succeeded or _failed will say how it ends.
				if src.said != "" {
					s.log.Error("a signed Stripe event misstated its payment; nothing credited", "topup", t.ID, "session", sess.ID,
						"event_said", src.said, "api_payment_status", sess.PaymentStatus)
				}
				if pi := paymentIntentID(sess.PaymentIntent); pi != nil {
					if err := topups.LinkPayment(tx, t.ID, *pi, now); err != nil {
						return "", err
					}
				}
				return "completed, payment " + string(sess.PaymentStatus) + ": waiting for it", nil
			}
			return s.creditSession(tx, t, sess, src, paid)
		case EvSessionAsyncFailed:
			_, err := topups.Fail(tx, t.ID, "the payment failed", now)
			return "payment failed", err
		default: // expired
			_, err := topups.Expire(tx, t.ID, now)
			return "expired", err
		}
	}
}

// creditSession credits what a paid session collected to its top-up, once.
func (s *Service) creditSession(tx *gorm.DB, t *models.Topup, sess *stripe.CheckoutSession, src source, paid *string) (string, error) {
	amount, currency := sessionUSD(sess)
	pi := paymentIntentID(sess.PaymentIntent)
	out, err := s.creditTopup(tx, t, sess.ID, amount, currency, pi, src)
	if out == outcomeCredited && paid != nil {
		// The top-up's own PaymentIntent, recorded by an earlier unpaid completion, is the one refunds name.
		if t.StripePaymentIntentID != nil {
			pi = t.StripePaymentIntentID
		}
		if pi != nil {
			*paid = *pi
		}
	}
	return out, err
}

// sessionUSD returns what a session collected in US dollars: amount_total, or — when the customer paid
// in another currency through Adaptive Pricing (switched off on our sessions, but an account setting
// could predate that) — the USD amount Stripe converted from.
func sessionUSD(sess *stripe.CheckoutSession) (int64, stripe.Currency) {
	if sess.Currency != stripe.CurrencyUSD && sess.CurrencyConversion != nil && sess.CurrencyConversion.SourceCurrency == stripe.CurrencyUSD {
		return sess.CurrencyConversion.AmountTotal, stripe.CurrencyUSD
	}
	return sess.AmountTotal, sess.Currency
}

// creditTopup credits what Stripe collected for a top-up, once. The top-up row is the gate (only the
// transaction that stamps credited_at credits), and the ledger's unique (kind, external_id) refuses a
// second topup entry for the same session or PaymentIntent even if the gate were wrong. The credit queues
// the receipt's job in the same transaction. The top-up's flag
// says what this credit found — set, or cleared when all agree — never what an earlier event did.
func (s *Service) creditTopup(tx *gorm.DB, t *models.Topup, externalID string, amountCents int64, currency stripe.Currency, pi *string, src source) (string, error) {
	if t.CreditedAt != nil {
		return "already credited", nil
	}
	if !src.api && needsConfirming(t, amountCents, currency) {
		return "", fmt.Errorf("credit top-up %s with %s: %w", t.ID, stripeAmount(amountCents, currency), errUnconfirmed)
	}
	now := s.now().UTC()
	asked := money.Micros(t.AmountMicros)
	if currency != stripe.CurrencyUSD {
		flag := fmt.Sprintf("Stripe collected %s (not USD; confirmed with Stripe's API): not credited; refund it or credit by hand", stripeAmount(amountCents, currency))
		s.log.Error("top-up paid in a currency the wallet does not hold", "topup", t.ID, "currency", currency)
		// A credit committed meanwhile (another event of the same payment) keeps its own flag.
		return "not credited: " + string(currency), topups.FlagUncredited(tx, t.ID, flag, now)
	}
	amount := fromCents(amountCents)
	if amount <= 0 {
		return "", ignore("Stripe reports nothing collected for %s", externalID)
	}
	flag := ""
	if amount != asked {
		flag = fmt.Sprintf("Stripe collected %s for a top-up of %s (confirmed with Stripe's API): credited as Stripe reports", amount.USD(), asked.USD())
		s.log.Warn("top-up amount differs from what Stripe collected", "topup", t.ID, "asked", t.AmountMicros, "collected", int64(amount))
	}
	if src.said != "" {
		// Stripe does not contradict itself: whoever signed this event holds the webhook secret.
		if flag == "" {
			flag = fmt.Sprintf("Stripe collected %s for a top-up of %s (confirmed with Stripe's API), but the signed event said %s: credited as Stripe's API says",
				amount.USD(), asked.USD(), src.said)
		} else {
			flag += "; the signed event said " + src.said
		}
		flag += "; check who holds the webhook secret"
		s.log.Error("a signed Stripe event misstated its payment; credited what Stripe's API says", "topup", t.ID, "stripe_id", externalID,
			"event_said", src.said, "api_says", amount.USD())
	}
	credited, err := topups.Credit(tx, t.ID, int64(amount), flag, pi, now)
	if err != nil {
		return "", err
	}
	if !credited {
		return "already credited", nil
	}
	_, err = billing.Credit{AccountID: t.AccountID, Kind: models.KindTopup, Amount: amount, ExternalID: externalID,
		Reason: "card top-up " + t.ID, Actor: "stripe", At: now}.ApplyIn(tx)
	if err != nil {
		return "", err
	}
	// The receipt is owed from this commit on, and only then.
	if _, err := s.queue.InsertTx(tx, receiptArgs{TopupID: t.ID}, nil); err != nil {
		return "", err
	}
	return outcomeCredited, nil
}

// ledgerHas reports whether an entry of kind with external id exists.
func ledgerHas(tx *gorm.DB, kind, externalID string) (bool, error) {
	var n int64
	err := tx.Model(&models.LedgerEntry{}).Where("kind = ? AND external_id = ?", kind, externalID).Count(&n).Error
	return n > 0, err
}

// topupOfPayment finds the credited top-up a charge or dispute is about, by its PaymentIntent.
func topupOfPayment(tx *gorm.DB, pi *stripe.PaymentIntent) (*models.Topup, error) {
	id := paymentIntentID(pi)
	if id == nil {
		return nil, ignore("no payment intent named")
	}
	t, err := findTopup(tx, "stripe_payment_intent_id = ?", *id)
	if err != nil {
		return nil, err
	}
	if t == nil || t.CreditedAt == nil {
		// A refund or dispute can arrive before the payment's own event: wait for it.
		return nil, errDefer
	}
	return t, nil
}

// refundsOf returns a charge's refunds: from the event when it carries the whole list (API versions
// before 2022-11-15 did), otherwise listed from Stripe. A null entry in the event's list is no refund:
// it is skipped, and a list of nothing else is no list.
func (s *Service) refundsOf(ctx context.Context, ch *stripe.Charge) ([]*stripe.Refund, error) {
	if ch.Refunds != nil && !ch.Refunds.HasMore {
		var listed []*stripe.Refund
		for _, r := range ch.Refunds.Data {
			if r != nil {
				listed = append(listed, r)
			}
		}
		if len(listed) > 0 {
			return listed, nil
		}
	}
	if !s.Enabled() {
		return nil, ErrNotConfigured
	}
	p := &stripe.RefundListParams{Charge: stripe.String(ch.ID)}
	p.Context = ctx
	p.Limit = stripe.Int64(100)
	var out []*stripe.Refund
	it := s.stripe.Refunds.List(p)
	for it.Next() {
		out = append(out, it.Refund())
	}
	if err := it.Err(); err != nil {
		return nil, stripeFailure("list refunds of charge "+ch.ID, err)
	}
	return out, nil
}

// refundEffect debits each refund of a charge once, by the refund's id: charge.refunded carries the
// refunded total so far, and the same refund is in every later event about the charge.
func (s *Service) refundEffect(ch *stripe.Charge, refunds []*stripe.Refund) effect {
	return func(tx *gorm.DB) (string, error) {
		t, err := topupOfPayment(tx, ch.PaymentIntent)
		if err != nil {
			return "", err
		}
		now := s.now().UTC()
		debited := 0
		for _, r := range refunds {
			if r == nil {
				continue
			}
			if r.Charge != nil && r.Charge.ID != "" && r.Charge.ID != ch.ID {
				continue
			}
			// A refund that failed or was canceled gave nothing back.
			if r.Status == stripe.RefundStatusFailed || r.Status == stripe.RefundStatusCanceled || r.Amount <= 0 {
				continue
			}
			if r.Currency != "" && r.Currency != stripe.CurrencyUSD {
				continue
			}
			done, err := ledgerHas(tx, models.KindRefund, r.ID)
			if err != nil {
				return "", err
			}
			if done {
				continue
			}
			if _, err := (billing.Credit{AccountID: t.AccountID, Kind: models.KindRefund, Amount: -fromCents(r.Amount),
				ExternalID: r.ID, Reason: "card refund of top-up " + t.ID, Actor: "stripe", At: now}).ApplyIn(tx); err != nil {
				return "", err
			}
			debited++
		}
		return fmt.Sprintf("%d refund(s) debited", debited), nil
	}
}

// disputeEffect debits a dispute's amount once when it opens, and credits it back once if it closes in
// our favour (won, or an inquiry closed without a chargeback).
func (s *Service) disputeEffect(typ string, d *stripe.Dispute) effect {
	return func(tx *gorm.DB) (string, error) {
		pi := d.PaymentIntent
		if pi == nil && d.Charge != nil {
			pi = d.Charge.PaymentIntent
		}
		t, err := topupOfPayment(tx, pi)
		if err != nil {
			return "", err
		}
		now := s.now().UTC()
		debited, err := ledgerHas(tx, models.KindDispute, d.ID)
		if err != nil {
			return "", err
		}
		debit := func() (string, error) {
			if debited {
				return "already debited", nil
			}
			_, err := billing.Credit{AccountID: t.AccountID, Kind: models.KindDispute, Amount: -fromCents(d.Amount),
				ExternalID: d.ID, Reason: "card dispute of top-up " + t.ID, Actor: "stripe", At: now}.ApplyIn(tx)
			return "dispute debited", err
		}
		if typ == EvDisputeCreated {
			return debit()
		}
		switch d.Status {
		case stripe.DisputeStatusWon, stripe.DisputeStatusWarningClosed:
			if !debited {
				// The opening event has not been applied (it may still come, as a retry): book the
				// dispute and its return now, net zero, so that it finds the dispute already debited.
				if _, err := debit(); err != nil {
					return "", err
				}
			}
			back, err := ledgerHas(tx, models.KindDisputeWon, d.ID)
			if err != nil || back {
				return "already credited back", err
			}
			var e models.LedgerEntry
			if err := tx.Where("kind = ? AND external_id = ?", models.KindDispute, d.ID).Take(&e).Error; err != nil {
				return "", fmt.Errorf("read dispute debit %s: %w", d.ID, err)
			}
			_, err = billing.Credit{AccountID: t.AccountID, Kind: models.KindDisputeWon, Amount: money.Micros(-e.DeltaAvailable),
				ExternalID: d.ID, Reason: "card dispute won, top-up " + t.ID, Actor: "stripe", At: now}.ApplyIn(tx)
			return "dispute won: credited back", err
		case stripe.DisputeStatusLost:
			// The opening event may never have come: a lost dispute is money gone either way.
			return debit()
		}
		return "closed as " + string(d.Status), nil
	}
}

// paymentIntentEffect credits or fails an auto-recharge; a credit names the PaymentIntent in *paid.
// Checkout's own PaymentIntents are ignored here: their sessions' events credit them.
func (s *Service) paymentIntentEffect(typ string, pi *stripe.PaymentIntent, src source, paid *string) effect {
	return func(tx *gorm.DB) (string, error) {
		t, unstored, err := rechargeOf(tx, pi)
		if err == nil && unstored {
			err = topups.LinkPayment(tx, t.ID, pi.ID, s.now().UTC())
		}
		if err != nil {
			return "", err
		}
		if t == nil {
			return "", ignore("payment intent %s is not an auto-recharge of videogen's", pi.ID)
		}
		if typ == EvPaymentIntentPaid {
			if src.api && pi.Status != stripe.PaymentIntentStatusSucceeded {
				// The event said succeeded; Stripe's API, asked because the amount differed, says not.
				s.log.Error("a signed Stripe event misstated its payment; nothing credited", "topup", t.ID, "payment_intent", pi.ID,
					"event_said", src.said, "api_status", pi.Status)
				return "Stripe's API says the payment is " + string(pi.Status) + ": nothing credited", nil
			}
			out, err := s.creditTopup(tx, t, pi.ID, pi.AmountReceived, pi.Currency, &pi.ID, src)
			if out == outcomeCredited && paid != nil {
				*paid = pi.ID
			}
			return out, err
		}
		reason := "the card was declined"
		if pi.LastPaymentError != nil && pi.LastPaymentError.Msg != "" {
			reason = pi.LastPaymentError.Msg
		}
		return "auto-recharge declined", s.failRecharge(tx, t, reason)
	}
}
