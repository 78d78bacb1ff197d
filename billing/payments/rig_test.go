package payments_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"videogen/billing/payments"
	"videogen/internal/domain/accounts"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/queue"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

// rig is the payments service on a real database, its Stripe API answered by stripe-mock behind a front
// that records every call, for the domain tests of the webhook's state machine: events are signed as
// Stripe signs them, recorded and processed through the service's own API (Record, Process), and the
// top-up rows and the ledger read back from the database.
type rig struct {
	d     *db.DB
	s     *payments.Service
	front *testkit.StripeFront
}

func newRig(t *testing.T, dbURL string) *rig {
	t.Helper()
	d := testkit.OpenDB(t, dbURL)
	front := testkit.NewStripeFront(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := payments.New(payments.Config{PublicBaseURL: "http://videogen.test", WebhookSecret: testkit.StripeWebhookSecret,
		MinTopup: 5 * money.PerUSD, MaxTopup: 1000 * money.PerUSD, Owner: "payments-test"},
		payments.Deps{DB: d, Queue: idleQueue(t, d), Stripe: payments.NewStripeClient(testkit.StripeKey, front.URL, log), Log: log, Now: time.Now})
	// Whatever a test did, the wallets and their ledger agree at its end.
	t.Cleanup(func() { testkit.CheckLedger(t, d) })
	return &rig{d: d, s: s, front: front}
}

// idleQueue is a queue that takes jobs and never works them: these tests drive Process themselves.
func idleQueue(t *testing.T, d *db.DB) *queue.Queue {
	t.Helper()
	q, err := queue.New(d, queue.Config{Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// customer is a new account with one verified user, and nothing in its wallet.
type customer struct {
	AccountID, UserID int64
	Email             string
}

func (r *rig) customer(t *testing.T) customer {
	t.Helper()
	email := "buyer-" + strings.ToLower(ids.NewTopupID()[len("topup_"):]) + "@example.com"
	u, err := accounts.Create(context.Background(), r.d, accounts.NewUser{Email: email, Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	return customer{AccountID: u.AccountID, UserID: u.ID, Email: email}
}

// checkout starts a Checkout top-up of usd for c, as the wallet page does: a pending top-up with its
// session, created on Stripe (stripe-mock).
func (r *rig) checkout(t *testing.T, c customer, usd int64) *models.Topup {
	t.Helper()
	id, _, err := r.s.StartCheckout(context.Background(), payments.Checkout{AccountID: c.AccountID, UserID: c.UserID, Email: c.Email,
		Amount: money.Micros(usd) * money.PerUSD})
	if err != nil {
		t.Fatalf("start checkout: %v", err)
	}
	top := r.topup(t, c, id)
	if top.State != models.TopupPending || top.StripeSessionID == nil {
		t.Fatalf("a new checkout: %+v", top)
	}
	return &top
}

// recharge writes an auto-recharge of usd for c as its charge job leaves it once it has created its
// PaymentIntent (pi_<top-up id>) on Stripe: pending, waiting for the payment's webhook.
func (r *rig) recharge(t *testing.T, c customer, usd int64) *models.Topup {
	t.Helper()
	now := time.Now().UTC()
	id := ids.NewTopupID()
	pi := "pi_" + id
	top := &models.Topup{ID: id, AccountID: c.AccountID, Source: models.TopupAutoRecharge, State: models.TopupPending,
		AmountMicros: usd * int64(money.PerUSD), StripePaymentIntentID: &pi, CreatedAt: now, UpdatedAt: now}
	if err := r.d.W.Create(top).Error; err != nil {
		t.Fatal(err)
	}
	return top
}

// topup reads a top-up back through the service.
func (r *rig) topup(t *testing.T, c customer, id string) models.Topup {
	t.Helper()
	top, err := r.s.Topup(context.Background(), c.AccountID, id)
	if err != nil {
		t.Fatal(err)
	}
	return *top
}

// delivery is one webhook delivery: what Record said of it, and what Process made of it.
type delivery struct {
	ID        string
	Duplicate bool
	Outcome   string
}

// deliver signs an event of typ about object with id, records it and processes it, as the webhook does.
func (r *rig) deliver(t *testing.T, id, typ string, object map[string]any) delivery {
	t.Helper()
	ctx := context.Background()
	payload := testkit.StripeEvent(id, typ, object)
	got, err := r.s.Record(ctx, payload, testkit.SignStripe(payload, testkit.StripeWebhookSecret, time.Now()))
	if err != nil {
		t.Fatalf("record %s %s: %v", typ, id, err)
	}
	out, err := r.s.Process(ctx, got.EventID)
	if err != nil {
		t.Fatalf("process %s %s: %v", typ, id, err)
	}
	return delivery{ID: got.EventID, Duplicate: got.Duplicate, Outcome: out}
}

// event reads a recorded event's row.
func (r *rig) event(t *testing.T, id string) models.StripeEvent {
	t.Helper()
	var e models.StripeEvent
	if err := r.d.R.Take(&e, "id = ?", id).Error; err != nil {
		t.Fatal(err)
	}
	return e
}

// ledger lists an account's entries, oldest first, as "kind amount" ("topup $20.00", "refund -$5.00"),
// and checks that the wallet's available balance is their sum.
func (r *rig) ledger(t *testing.T, c customer) []string {
	t.Helper()
	var es []models.LedgerEntry
	if err := r.d.R.Where("account_id = ?", c.AccountID).Order("id").Find(&es).Error; err != nil {
		t.Fatal(err)
	}
	out := []string{}
	var sum int64
	for _, e := range es {
		out = append(out, e.Kind+" "+money.Micros(e.DeltaAvailable).USD())
		sum += e.DeltaAvailable
	}
	var a models.Account
	if err := r.d.R.Take(&a, c.AccountID).Error; err != nil {
		t.Fatal(err)
	}
	if a.AvailableMicros != sum {
		t.Errorf("available %s, the ledger says %s", money.Micros(a.AvailableMicros), money.Micros(sum))
	}
	return out
}

// apiCalls counts the calls made to Stripe's API whose path starts with prefix.
func (r *rig) apiCalls(prefix string) int { return len(r.front.Calls(prefix)) }

// Stripe's objects as the events of API version 2023-10-16 carry them. A Checkout top-up's session pays
// through pi_<top-up id>, charged as ch_<top-up id>; an auto-recharge's PaymentIntent is its
// stripe_payment_intent_id.

func session(top *models.Topup, cents int64, paymentStatus string) map[string]any {
	status := "complete"
	if paymentStatus == "expired" {
		status, paymentStatus = "expired", "unpaid"
	}
	return map[string]any{
		"id": *top.StripeSessionID, "object": "checkout.session", "mode": "payment", "currency": "usd",
		"amount_total": cents, "payment_status": paymentStatus, "status": status,
		"client_reference_id": top.ID, "payment_intent": "pi_" + top.ID,
		"metadata": map[string]any{"topup_id": top.ID, "account_id": fmt.Sprint(top.AccountID), "source": top.Source},
	}
}

// paymentOf is the PaymentIntent a top-up's money came through.
func paymentOf(top *models.Topup) string {
	if top.Source == models.TopupAutoRecharge {
		return *top.StripePaymentIntentID
	}
	return "pi_" + top.ID
}

func intent(top *models.Topup, cents int64, status string) map[string]any {
	pi := map[string]any{"id": paymentOf(top), "object": "payment_intent", "amount": cents, "amount_received": 0,
		"currency": "usd", "status": status,
		"metadata": map[string]any{"topup_id": top.ID, "account_id": fmt.Sprint(top.AccountID), "source": top.Source}}
	switch status {
	case "succeeded":
		pi["amount_received"] = cents
	case "requires_payment_method":
		pi["last_payment_error"] = map[string]any{"type": "card_error", "code": "card_declined", "message": "Your card was declined."}
	}
	return pi
}

// charge is the charge of a top-up's payment with the refunds it lists (each an id and cents), all
// succeeded.
func charge(top *models.Topup, cents int64, refunds ...any) map[string]any {
	chargeID := "ch_" + top.ID
	var data []any
	var refunded int64
	for i := 0; i+1 < len(refunds); i += 2 {
		amount := refunds[i+1].(int64)
		data = append(data, map[string]any{"id": refunds[i].(string) + "_" + top.ID, "object": "refund", "amount": amount,
			"currency": "usd", "status": "succeeded", "charge": chargeID})
		refunded += amount
	}
	return map[string]any{"id": chargeID, "object": "charge", "amount": cents, "amount_refunded": refunded, "currency": "usd",
		"payment_intent": paymentOf(top), "refunds": map[string]any{"object": "list", "has_more": false, "data": data}}
}

func dispute(top *models.Topup, cents int64, status string) map[string]any {
	return map[string]any{"id": "dp_" + top.ID, "object": "dispute", "amount": cents, "currency": "usd", "charge": "ch_" + top.ID,
		"payment_intent": paymentOf(top), "status": status}
}
