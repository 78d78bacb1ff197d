package payments_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"videogen/billing/payments"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

// after is what one event leaves behind: what Process said, the top-up's row, and its account's ledger.
type after struct {
	outcome  string   // Process's answer: credited, processed, ignored, or deferred (it waits for its payment)
	state    string   // the top-up's
	credited int64    // dollars the top-up credited
	flag     string   // found in the top-up's flag for staff ("": no flag)
	failure  string   // the top-up's failure ("": not checked)
	ledger   []string // the account's entries, oldest first
	confirms int      // the event's amount confirmed with Stripe's API: GETs of the session or PaymentIntent
}

// eventState is the state a webhook event's row is left in by an outcome: one that waits stays pending.
func eventState(outcome string) string {
	switch outcome {
	case "deferred":
		return models.EventPending
	case "ignored":
		return models.EventIgnored
	}
	return models.EventProcessed
}

// replayed is what Process answers for the same event delivered again: the first answer's state, or
// another wait.
func replayed(outcome string) string {
	if outcome == "credited" {
		return "processed"
	}
	return outcome
}

// check compares a top-up and its account's ledger with w.
func (r *rig) check(t *testing.T, c customer, top *models.Topup, w after) {
	t.Helper()
	got := r.topup(t, c, top.ID)
	if got.State != w.state || got.CreditedMicros != w.credited*int64(money.PerUSD) {
		t.Errorf("top-up %s credited %s, want %s credited $%d.00", got.State, money.Micros(got.CreditedMicros).USD(), w.state, w.credited)
	}
	if (got.CreditedAt != nil) != (w.credited > 0) || got.ReceiptDue != (w.credited > 0) {
		t.Errorf("credited at %v, receipt due %v, after a credit of $%d", got.CreditedAt, got.ReceiptDue, w.credited)
	}
	if (w.flag == "") != (got.Flag == "") || !strings.Contains(got.Flag, w.flag) {
		t.Errorf("flag %q, want %q", got.Flag, w.flag)
	}
	if w.failure != "" && got.Failure != w.failure {
		t.Errorf("failure %q, want %q", got.Failure, w.failure)
	}
	if l := r.ledger(t, c); !slices.Equal(l, w.ledger) {
		t.Errorf("ledger %q, want %q", l, w.ledger)
	}
}

// topupState is a state a top-up can be in, and how an event (through the service) brings a new
// top-up there.
type topupState struct {
	name  string
	reach func(t *testing.T, r *rig, top *models.Topup)
}

func by(id, typ string, object func(*models.Topup) map[string]any) func(t *testing.T, r *rig, top *models.Topup) {
	return func(t *testing.T, r *rig, top *models.Topup) {
		t.Helper()
		r.deliver(t, id+top.ID, typ, object(top))
	}
}

// eventCase is one event, and what it leaves in each state it can meet a top-up in.
type eventCase struct {
	name   string
	typ    string
	object func(top *models.Topup) map[string]any
	api    func(r *rig, top *models.Topup) // what Stripe's API answers about the payment, when asked
	want   map[string]after
}

// runMatrix applies each event to a fresh top-up (of usd, made by start) in each state, then delivers the
// same event again, and checks the top-up, the ledger, the event's row and the calls to Stripe's API
// after each delivery.
func runMatrix(t *testing.T, start func(*testing.T, *rig, customer) *models.Topup, states []topupState, events []eventCase) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		for _, ev := range events {
			for _, st := range states {
				w, ok := ev.want[st.name]
				if !ok {
					t.Fatalf("%s: no outcome given for a %s top-up", ev.name, st.name)
				}
				t.Run(ev.name+"/"+st.name, func(t *testing.T) {
					c := r.customer(t)
					top := start(t, r, c)
					if st.reach != nil {
						st.reach(t, r, top)
					}
					if ev.api != nil {
						ev.api(r, top)
					}
					confirms := func() int { return r.apiCalls("/v1/checkout/sessions/") + r.apiCalls("/v1/payment_intents/") }
					before, lists := confirms(), r.apiCalls("/v1/refunds")

					d := r.deliver(t, "evt_"+top.ID, ev.typ, ev.object(top))
					if d.Duplicate || d.Outcome != w.outcome {
						t.Errorf("first delivery: %q (duplicate %v), want %q", d.Outcome, d.Duplicate, w.outcome)
					}
					r.check(t, c, top, w)
					if n := confirms() - before; n != w.confirms {
						t.Errorf("%d calls to Stripe's API to confirm the amount, want %d", n, w.confirms)
					}
					if e := r.event(t, d.ID); e.State != eventState(w.outcome) {
						t.Errorf("the event is %s (%s), want %s", e.State, e.Note, eventState(w.outcome))
					}

					// The same event again, as Stripe redelivers it: nothing changes, nothing more is asked.
					again := r.deliver(t, "evt_"+top.ID, ev.typ, ev.object(top))
					if !again.Duplicate || again.Outcome != replayed(w.outcome) {
						t.Errorf("the same event again: %q (duplicate %v), want %q", again.Outcome, again.Duplicate, replayed(w.outcome))
					}
					r.check(t, c, top, w)
					if n := confirms() - before; n != w.confirms {
						t.Errorf("%d calls to Stripe's API to confirm the amount after the replay, want %d", n, w.confirms)
					}
					if n := r.apiCalls("/v1/refunds") - lists; n != 0 {
						t.Errorf("%d refund lists for an event that carries its refunds", n)
					}
				})
			}
		}
	})
}

// TestCheckoutTopupStates: every event a Checkout top-up can receive, applied to a top-up of $20 in each
// state it can be in (pending; credited, failed or expired by an earlier event), and then again. A paid
// session credits once what Stripe collected, whatever the top-up's state (nothing collected goes
// uncredited), confirming an amount other than the top-up's with Stripe's API first; an unpaid one
// credits nothing; a failed or expired session ends only a top-up still pending; refunds and disputes
// wait until the payment is credited, then move the wallet once each; auto-recharge events pass it by.
func TestCheckoutTopupStates(t *testing.T) {
	const (
		topup    = "topup $20.00"
		refund   = "refund -$5.00"
		disputed = "dispute -$20.00"
		won      = "dispute_won $20.00"
	)
	var (
		none      = []string{}
		credited  = []string{topup}
		mismatch  = "Stripe collected $25.00 for a top-up of $20.00 (confirmed with Stripe's API)"
		asPending = after{"processed", models.TopupPending, 0, "", "", none, 0}
		asCredit  = after{"processed", models.TopupCredited, 20, "", "", credited, 0}
		asFailed  = after{"processed", models.TopupFailed, 0, "", "the payment failed", none, 0}
		asExpired = after{"processed", models.TopupExpired, 0, "", "", none, 0}
	)
	with := func(a after, outcome string) after { a.outcome = outcome; return a }
	paid := map[string]after{
		"pending":  {"credited", models.TopupCredited, 20, "", "", credited, 0},
		"credited": asCredit,
		"failed":   {"credited", models.TopupCredited, 20, "", "", credited, 0},
		"expired":  {"credited", models.TopupCredited, 20, "", "", credited, 0},
	}
	// A refund or a dispute of a payment never credited waits for it.
	waits := func(credited after) map[string]after {
		return map[string]after{"pending": with(asPending, "deferred"), "credited": credited,
			"failed": with(asFailed, "deferred"), "expired": with(asExpired, "deferred")}
	}
	notOurs := map[string]after{"pending": with(asPending, "ignored"), "credited": with(asCredit, "ignored"),
		"failed": with(asFailed, "ignored"), "expired": with(asExpired, "ignored")}

	states := []topupState{
		{"pending", nil},
		{"credited", by("evt_paid_", payments.EvSessionCompleted, func(top *models.Topup) map[string]any { return session(top, 2000, "paid") })},
		{"failed", by("evt_failed_", payments.EvSessionAsyncFailed, func(top *models.Topup) map[string]any { return session(top, 2000, "unpaid") })},
		{"expired", by("evt_expired_", payments.EvSessionExpired, func(top *models.Topup) map[string]any { return session(top, 2000, "expired") })},
	}
	events := []eventCase{
		{name: "completed paid", typ: payments.EvSessionCompleted, want: paid,
			object: func(top *models.Topup) map[string]any { return session(top, 2000, "paid") }},
		{name: "completed paid another amount", typ: payments.EvSessionCompleted,
			object: func(top *models.Topup) map[string]any { return session(top, 2500, "paid") },
			api: func(r *rig, top *models.Topup) {
				r.front.Object("GET /v1/checkout/sessions/"+*top.StripeSessionID, session(top, 2500, "paid"))
			},
			want: map[string]after{
				"pending":  {"credited", models.TopupCredited, 25, mismatch, "", []string{"topup $25.00"}, 1},
				"credited": asCredit, // already credited: nothing to confirm
				"failed":   {"credited", models.TopupCredited, 25, mismatch, "", []string{"topup $25.00"}, 1},
				"expired":  {"credited", models.TopupCredited, 25, mismatch, "", []string{"topup $25.00"}, 1},
			}},
		{name: "completed unpaid", typ: payments.EvSessionCompleted,
			object: func(top *models.Topup) map[string]any { return session(top, 2000, "unpaid") },
			want:   map[string]after{"pending": asPending, "credited": asCredit, "failed": asFailed, "expired": asExpired}},
		{name: "async payment succeeded", typ: payments.EvSessionAsyncPaid, want: paid,
			object: func(top *models.Topup) map[string]any { return session(top, 2000, "paid") }},
		{name: "async payment failed", typ: payments.EvSessionAsyncFailed,
			object: func(top *models.Topup) map[string]any { return session(top, 2000, "unpaid") },
			want:   map[string]after{"pending": asFailed, "credited": asCredit, "failed": asFailed, "expired": asExpired}},
		{name: "expired", typ: payments.EvSessionExpired,
			object: func(top *models.Topup) map[string]any { return session(top, 2000, "expired") },
			want:   map[string]after{"pending": asExpired, "credited": asCredit, "failed": asFailed, "expired": asExpired}},
		{name: "charge refunded", typ: payments.EvChargeRefunded,
			object: func(top *models.Topup) map[string]any { return charge(top, 2000, "re_1", int64(500)) },
			want:   waits(after{"processed", models.TopupCredited, 20, "", "", []string{topup, refund}, 0})},
		{name: "dispute created", typ: payments.EvDisputeCreated,
			object: func(top *models.Topup) map[string]any { return dispute(top, 2000, "needs_response") },
			want:   waits(after{"processed", models.TopupCredited, 20, "", "", []string{topup, disputed}, 0})},
		{name: "dispute closed won", typ: payments.EvDisputeClosed,
			object: func(top *models.Topup) map[string]any { return dispute(top, 2000, "won") },
			// Its opening event never came: both are booked, net zero.
			want: waits(after{"processed", models.TopupCredited, 20, "", "", []string{topup, disputed, won}, 0})},
		{name: "dispute closed lost", typ: payments.EvDisputeClosed,
			object: func(top *models.Topup) map[string]any { return dispute(top, 2000, "lost") },
			want:   waits(after{"processed", models.TopupCredited, 20, "", "", []string{topup, disputed}, 0})},
		{name: "payment intent succeeded", typ: payments.EvPaymentIntentPaid, want: notOurs,
			object: func(top *models.Topup) map[string]any { return intent(top, 2000, "succeeded") }},
		{name: "payment intent failed", typ: payments.EvPaymentIntentFailed, want: notOurs,
			object: func(top *models.Topup) map[string]any { return intent(top, 2000, "requires_payment_method") }},
	}
	runMatrix(t, func(t *testing.T, r *rig, c customer) *models.Topup { return r.checkout(t, c, 20) }, states, events)
}

// TestRechargeTopupStates: every event an auto-recharge can receive, applied to a recharge of $25 in each
// state it can be in (pending with its PaymentIntent; credited or failed by an earlier event), and then
// again. A succeeded payment credits once what Stripe collected, confirming another amount with Stripe's
// API first; a failed one ends only a pending recharge; refunds and disputes wait for the credit.
func TestRechargeTopupStates(t *testing.T) {
	const topup = "topup $25.00"
	var (
		none     = []string{}
		declined = "Your card was declined."
		mismatch = "Stripe collected $20.00 for a top-up of $25.00 (confirmed with Stripe's API)"
		asCredit = after{"processed", models.TopupCredited, 25, "", "", []string{topup}, 0}
		asFailed = after{"processed", models.TopupFailed, 0, "", declined, none, 0}
	)
	states := []topupState{
		{"pending", nil},
		{"credited", by("evt_paid_", payments.EvPaymentIntentPaid, func(top *models.Topup) map[string]any { return intent(top, 2500, "succeeded") })},
		{"failed", by("evt_declined_", payments.EvPaymentIntentFailed, func(top *models.Topup) map[string]any {
			return intent(top, 2500, "requires_payment_method")
		})},
	}
	events := []eventCase{
		{name: "payment intent succeeded", typ: payments.EvPaymentIntentPaid,
			object: func(top *models.Topup) map[string]any { return intent(top, 2500, "succeeded") },
			want: map[string]after{
				"pending":  {"credited", models.TopupCredited, 25, "", "", []string{topup}, 0},
				"credited": asCredit,
				"failed":   {"credited", models.TopupCredited, 25, "", declined, []string{topup}, 0},
			}},
		{name: "payment intent succeeded another amount", typ: payments.EvPaymentIntentPaid,
			object: func(top *models.Topup) map[string]any { return intent(top, 2000, "succeeded") },
			api: func(r *rig, top *models.Topup) {
				r.front.Object("GET /v1/payment_intents/"+*top.StripePaymentIntentID, intent(top, 2000, "succeeded"))
			},
			want: map[string]after{
				"pending":  {"credited", models.TopupCredited, 20, mismatch, "", []string{"topup $20.00"}, 1},
				"credited": asCredit,
				"failed":   {"credited", models.TopupCredited, 20, mismatch, declined, []string{"topup $20.00"}, 1},
			}},
		{name: "payment intent failed", typ: payments.EvPaymentIntentFailed,
			object: func(top *models.Topup) map[string]any { return intent(top, 2500, "requires_payment_method") },
			want:   map[string]after{"pending": asFailed, "credited": asCredit, "failed": asFailed}},
		{name: "charge refunded", typ: payments.EvChargeRefunded,
			object: func(top *models.Topup) map[string]any { return charge(top, 2500, "re_1", int64(500)) },
			want: map[string]after{"pending": {"deferred", models.TopupPending, 0, "", "", none, 0},
				"credited": {"processed", models.TopupCredited, 25, "", "", []string{topup, "refund -$5.00"}, 0},
				"failed":   {"deferred", models.TopupFailed, 0, "", declined, none, 0}}},
		{name: "dispute created", typ: payments.EvDisputeCreated,
			object: func(top *models.Topup) map[string]any { return dispute(top, 2500, "needs_response") },
			want: map[string]after{"pending": {"deferred", models.TopupPending, 0, "", "", none, 0},
				"credited": {"processed", models.TopupCredited, 25, "", "", []string{topup, "dispute -$25.00"}, 0},
				"failed":   {"deferred", models.TopupFailed, 0, "", declined, none, 0}}},
	}
	runMatrix(t, func(t *testing.T, r *rig, c customer) *models.Topup { return r.recharge(t, c, 25) }, states, events)
}

// step is one delivery of an out-of-order sequence and what Process answers it.
type step struct {
	typ     string
	object  func(top *models.Topup) map[string]any
	outcome string
}

// TestEventsOutOfOrder: Stripe does not promise any order. A refund or a dispute that comes before its
// payment waits, and is applied the moment the payment is credited (in the same delivery); a dispute
// closed before it was opened is booked whole, and the opening then changes nothing; an async payment's
// outcome before its session's completion is not undone by it; a later refund event listing an earlier
// refund debits only the new one. Each ends with every event processed and the ledger exact.
func TestEventsOutOfOrder(t *testing.T) {
	sess := func(cents int64, status string) func(*models.Topup) map[string]any {
		return func(top *models.Topup) map[string]any { return session(top, cents, status) }
	}
	pi := func(cents int64, status string) func(*models.Topup) map[string]any {
		return func(top *models.Topup) map[string]any { return intent(top, cents, status) }
	}
	dsp := func(cents int64, status string) func(*models.Topup) map[string]any {
		return func(top *models.Topup) map[string]any { return dispute(top, cents, status) }
	}
	refunds := func(cents int64, refunds ...any) func(*models.Topup) map[string]any {
		return func(top *models.Topup) map[string]any { return charge(top, cents, refunds...) }
	}
	for _, tc := range []struct {
		name     string
		recharge bool // an auto-recharge of $25, else a Checkout top-up of $20
		steps    []step
		want     after // outcome unused
	}{
		{name: "refund before payment", steps: []step{
			{payments.EvChargeRefunded, refunds(2000, "re_1", int64(500)), "deferred"},
			{payments.EvSessionCompleted, sess(2000, "paid"), "credited"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "refund -$5.00"}}},
		{name: "dispute before payment", steps: []step{
			{payments.EvDisputeCreated, dsp(2000, "needs_response"), "deferred"},
			{payments.EvSessionAsyncPaid, sess(2000, "paid"), "credited"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "dispute -$20.00"}}},
		{name: "closed before created", steps: []step{
			{payments.EvSessionCompleted, sess(2000, "paid"), "credited"},
			{payments.EvDisputeClosed, dsp(2000, "won"), "processed"},
			{payments.EvDisputeCreated, dsp(2000, "needs_response"), "processed"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "dispute -$20.00", "dispute_won $20.00"}}},
		{name: "closed lost before created", steps: []step{
			{payments.EvSessionCompleted, sess(2000, "paid"), "credited"},
			{payments.EvDisputeClosed, dsp(1500, "lost"), "processed"},
			{payments.EvDisputeCreated, dsp(1500, "needs_response"), "processed"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "dispute -$15.00"}}},
		{name: "closed and created before payment", steps: []step{
			{payments.EvDisputeClosed, dsp(2000, "won"), "deferred"},
			{payments.EvDisputeCreated, dsp(2000, "needs_response"), "deferred"},
			{payments.EvSessionCompleted, sess(2000, "paid"), "credited"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "dispute -$20.00", "dispute_won $20.00"}}},
		{name: "async succeeded before completed", steps: []step{
			{payments.EvSessionAsyncPaid, sess(2000, "paid"), "credited"},
			{payments.EvSessionCompleted, sess(2000, "unpaid"), "processed"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00"}}},
		{name: "async failed before completed", steps: []step{
			{payments.EvSessionAsyncFailed, sess(2000, "unpaid"), "processed"},
			{payments.EvSessionCompleted, sess(2000, "unpaid"), "processed"},
		}, want: after{state: models.TopupFailed, failure: "the payment failed", ledger: []string{}}},
		{name: "completed after expired", steps: []step{
			{payments.EvSessionExpired, sess(2000, "expired"), "processed"},
			{payments.EvSessionCompleted, sess(2000, "unpaid"), "processed"},
		}, want: after{state: models.TopupExpired, ledger: []string{}}},
		{name: "refund listed again", steps: []step{
			{payments.EvSessionCompleted, sess(2000, "paid"), "credited"},
			{payments.EvChargeRefunded, refunds(2000, "re_1", int64(500)), "processed"},
			{payments.EvChargeRefunded, refunds(2000, "re_1", int64(500), "re_2", int64(300)), "processed"},
		}, want: after{state: models.TopupCredited, credited: 20, ledger: []string{"topup $20.00", "refund -$5.00", "refund -$3.00"}}},
		{name: "refund before an auto-recharge's payment", recharge: true, steps: []step{
			{payments.EvChargeRefunded, refunds(2500, "re_1", int64(2500)), "deferred"},
			{payments.EvPaymentIntentPaid, pi(2500, "succeeded"), "credited"},
		}, want: after{state: models.TopupCredited, credited: 25, ledger: []string{"topup $25.00", "refund -$25.00"}}},
		{name: "declined after an auto-recharge's payment", recharge: true, steps: []step{
			{payments.EvPaymentIntentPaid, pi(2500, "succeeded"), "credited"},
			{payments.EvPaymentIntentFailed, pi(2500, "requires_payment_method"), "processed"},
		}, want: after{state: models.TopupCredited, credited: 25, ledger: []string{"topup $25.00"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testkit.EachDB(t, func(t *testing.T, dbURL string) {
				r := newRig(t, dbURL)
				c := r.customer(t)
				var top *models.Topup
				if tc.recharge {
					top = r.recharge(t, c, 25)
				} else {
					top = r.checkout(t, c, 20)
				}
				var ids []string
				for i, s := range tc.steps {
					// Events of one second are taken in the order of their ids: this sequence's own.
					d := r.deliver(t, fmt.Sprintf("evt_%d_%s", i, top.ID), s.typ, s.object(top))
					if d.Outcome != s.outcome {
						t.Fatalf("step %d (%s): %q, want %q", i, s.typ, d.Outcome, s.outcome)
					}
					ids = append(ids, d.ID)
				}
				r.check(t, c, top, tc.want)
				for i, id := range ids {
					if e := r.event(t, id); e.State != models.EventProcessed {
						t.Errorf("step %d (%s) is %s at the end: %s", i, e.Type, e.State, e.Note)
					}
				}
			})
		})
	}
}
