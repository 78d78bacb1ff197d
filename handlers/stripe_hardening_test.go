package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/ids"
	"videogen/internal/testkit"
	"videogen/models"
)

// The webhook's defences behind the signing secret: should the secret leak, or Stripe
// send something it never does, a signed event still cannot credit what Stripe did not collect.

func stripeEvent(t *testing.T, s *testkit.Server, id string) models.StripeEvent {
	t.Helper()
	var e models.StripeEvent
	if err := s.DB.R.Take(&e, "id = ?", id).Error; err != nil {
		t.Fatal(err)
	}
	return e
}

func sessionGets(front *testkit.StripeFront, top *models.Topup) int {
	n := 0
	for _, c := range front.Calls("/v1/checkout/sessions/" + *top.StripeSessionID) {
		if c.Method == http.MethodGet {
			n++
		}
	}
	return n
}

// TestStripeAmountConfirmedWithAPI: a signed checkout.session.completed saying 5,000,000 cents for a $10
// top-up does not credit $50,000. An amount other than the top-up's is asked of Stripe's API
// (GET /v1/checkout/sessions/{id}) before anything is credited, and what the API says is credited and
// flagged for staff; while the API cannot be reached the event stays pending and is credited once it can.
// The usual event, of the amount asked, makes no call.
func TestStripeAmountConfirmedWithAPI(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "forged@example.com")
		u := accountOf(t, s, "forged@example.com")
		ctx := context.Background()
		post := func(id string, top *models.Topup, cents int64) *testkit.Resp {
			t.Helper()
			return s.PostStripeEvent(t, testkit.StripeEvent(id, "checkout.session.completed", sessionObject(top, cents, "paid")))
		}
		credited := func(top *models.Topup, micros int64) models.Topup {
			t.Helper()
			got := topupOf(t, s, top.ID)
			if got.State != models.TopupCredited || got.CreditedMicros != micros {
				t.Fatalf("top-up %s: %+v, want %d credited", top.ID, got, micros)
			}
			return got
		}

		// The event says $50,000; the session Stripe has says $10, paid: $10 is credited, and flagged.
		forged, _ := startTopup(t, s, b, url.Values{"amount": {"10"}})
		front.Object("GET /v1/checkout/sessions/"+*forged.StripeSessionID, sessionObject(forged, 1000, "paid"))
		if r := post("evt_forged", forged, 5_000_000); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("forged amount: %d %s", r.Status, r.Body)
		}
		if n := sessionGets(front, forged); n != 1 {
			t.Fatalf("%d GETs of the session, want 1", n)
		}
		if got := credited(forged, 10_000_000); !strings.Contains(got.Flag, "$50000.00") || !strings.Contains(got.Flag, "Stripe's API") {
			t.Errorf("the misstated amount is not flagged for staff: %q", got.Flag)
		}
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 1 || es[0].DeltaAvailable != 10_000_000 {
			t.Fatalf("topup entries: %+v", es)
		}

		// The API confirms another amount than asked: that is what Stripe collected, credited and flagged.
		more, _ := startTopup(t, s, b, url.Values{"amount": {"10"}})
		front.Object("GET /v1/checkout/sessions/"+*more.StripeSessionID, sessionObject(more, 2000, "paid"))
		if r := post("evt_more", more, 5_000_000); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("confirmed other amount: %d %s", r.Status, r.Body)
		}
		if got := credited(more, 20_000_000); !strings.Contains(got.Flag, "Stripe collected $20.00 for a top-up of $10.00 (confirmed with Stripe's API)") {
			t.Errorf("flag %q", got.Flag)
		}

		// The amount asked: no call to Stripe, no flag.
		usual, _ := startTopup(t, s, b, url.Values{"amount": {"10"}})
		if r := post("evt_usual", usual, 1000); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("usual amount: %d %s", r.Status, r.Body)
		}
		if n := sessionGets(front, usual); n != 0 {
			t.Errorf("%d GETs of a session whose event agrees with its top-up", n)
		}
		if got := credited(usual, 10_000_000); got.Flag != "" {
			t.Errorf("flag %q on a top-up credited as asked", got.Flag)
		}

		// Stripe's API failing (a 500 that is not even JSON), or not answering at all: nothing is
		// credited, the delivery is answered 200 and the event stays pending; once the API answers, the
		// event's job's try credits what it says.
		for _, tc := range []struct {
			name   string
			answer func(w http.ResponseWriter, r *http.Request)
		}{
			{"500", func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "<html>upstream broke</html>", http.StatusInternalServerError)
			}},
			{"unreachable", func(w http.ResponseWriter, r *http.Request) {
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					_ = conn.Close()
				}
			}},
		} {
			top, _ := startTopup(t, s, b, url.Values{"amount": {"10"}})
			route := "GET /v1/checkout/sessions/" + *top.StripeSessionID
			front.Handle(route, tc.answer)
			evID := "evt_down_" + tc.name
			before := available(t, s, u.AccountID)
			if r := post(evID, top, 5_000_000); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"pending"`) {
				t.Fatalf("%s: %d %s", tc.name, r.Status, r.Body)
			}
			if got := topupOf(t, s, top.ID); got.CreditedAt != nil || available(t, s, u.AccountID) != before || sessionGets(front, top) == 0 {
				t.Fatalf("%s: credited without Stripe's API: %+v (%d GETs)", tc.name, got, sessionGets(front, top))
			}
			if e := stripeEvent(t, s, evID); e.State != models.EventPending || !strings.Contains(e.Note, "will retry") {
				t.Fatalf("%s: event %+v", tc.name, e)
			}
			front.Object(route, sessionObject(top, 1000, "paid"))
			if out, err := s.Payments.Process(ctx, evID); err != nil || out != "credited" {
				t.Fatalf("%s: retry: %q, %v", tc.name, out, err)
			}
			credited(top, 10_000_000)
			if available(t, s, u.AccountID) != before+10_000_000 {
				t.Fatalf("%s: available %d, want %d", tc.name, available(t, s, u.AccountID), before+10_000_000)
			}
		}
		if got := available(t, s, u.AccountID); got != 60_000_000 {
			t.Fatalf("available %d, want 60000000", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestStripeRechargeAmountConfirmedWithAPI: the same for an auto-recharge's payment_intent.succeeded —
// an amount_received other than the top-up's is asked of GET /v1/payment_intents/{id}, and only what the
// API says is credited.
func TestStripeRechargeAmountConfirmedWithAPI(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		acct := s.NewAccount(t, "")
		recharge := func() (*models.Topup, string) {
			t.Helper()
			id := ids.NewTopupID()
			pi := "pi_recharge_" + id
			now := time.Now().UTC()
			top := &models.Topup{ID: id, AccountID: acct.ID, Source: models.TopupAutoRecharge, State: models.TopupPending,
				AmountMicros: 25_000_000, StripePaymentIntentID: &pi, CreatedAt: now, UpdatedAt: now}
			if err := s.DB.W.Create(top).Error; err != nil {
				t.Fatal(err)
			}
			return top, pi
		}
		intent := func(top *models.Topup, pi string, cents int64) map[string]any {
			return map[string]any{"id": pi, "object": "payment_intent", "amount": 2500, "amount_received": cents, "currency": "usd",
				"status": "succeeded", "metadata": map[string]any{"topup_id": top.ID, "source": "auto_recharge"}}
		}
		// GETs confirming the amount; the receipt's own read of the PaymentIntent, by its job
		// after the credit, is told apart by the charge it expands.
		gets := func(pi string) int {
			n := 0
			for _, c := range front.Calls("/v1/payment_intents/" + pi) {
				if c.Method == http.MethodGet && c.Form.Get("expand[0]") == "" {
					n++
				}
			}
			return n
		}

		forged, pi := recharge()
		front.Object("GET /v1/payment_intents/"+pi, intent(forged, pi, 2500))
		r := s.PostStripeEvent(t, testkit.StripeEvent("evt_pi_forged", "payment_intent.succeeded", intent(forged, pi, 5_000_000)))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) || gets(pi) != 1 {
			t.Fatalf("forged amount: %d %s, %d GETs", r.Status, r.Body, gets(pi))
		}
		if got := topupOf(t, s, forged.ID); got.CreditedMicros != 25_000_000 || !strings.Contains(got.Flag, "$50000.00") {
			t.Fatalf("forged recharge: %+v", got)
		}

		usual, pi2 := recharge()
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_pi_usual", "payment_intent.succeeded", intent(usual, pi2, 2500))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"credited"`) || gets(pi2) != 0 {
			t.Fatalf("usual amount: %d %s, %d GETs", r.Status, r.Body, gets(pi2))
		}
		if got := topupOf(t, s, usual.ID); got.CreditedMicros != 25_000_000 || got.Flag != "" {
			t.Fatalf("usual recharge: %+v", got)
		}
		if got := available(t, s, acct.ID); got != 50_000_000 {
			t.Fatalf("available %d, want 50000000", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestStripeWebhookRefusesFutureSignatures: webhook.ConstructEvent refuses signatures too old, not those
// dated ahead; one dated a day ahead would stay replayable for that day. More than 5 minutes ahead is
// refused like any bad signature; a minute of clock skew is not.
func TestStripeWebhookRefusesFutureSignatures(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		ev := testkit.StripeEvent("evt_ahead", "customer.created", map[string]any{"id": "cus_ahead", "object": "customer"})
		for _, ahead := range []time.Duration{24 * time.Hour, 6 * time.Minute} {
			r := s.PostStripeRaw(t, ev, testkit.SignStripe(ev, testkit.StripeWebhookSecret, time.Now().Add(ahead)))
			if r.Status != 400 || r.ErrorCode() != "bad_signature" {
				t.Fatalf("signed %v ahead: %d %s", ahead, r.Status, r.Body)
			}
		}
		if n := stripeEventCount(t, s); n != 0 {
			t.Fatalf("%d events recorded from signatures dated ahead", n)
		}
		r := s.PostStripeRaw(t, ev, testkit.SignStripe(ev, testkit.StripeWebhookSecret, time.Now().Add(time.Minute)))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"duplicate":false`) {
			t.Fatalf("signed a minute ahead: %d %s", r.Status, r.Body)
		}
	})
}

// TestStripeWebhookRefusesEventsWithoutID: an event without an id would be recorded under "", and every
// later id-less event taken for its replay. It is refused (400 invalid_event) and nothing is recorded —
// the second one too, refused for what it is, not answered as a duplicate.
func TestStripeWebhookRefusesEventsWithoutID(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		empty := testkit.StripeEvent("", "customer.created", map[string]any{"id": "cus_noid", "object": "customer"})
		var ev map[string]any
		_ = json.Unmarshal(empty, &ev)
		delete(ev, "id")
		absent, _ := json.Marshal(ev)
		for i, payload := range [][]byte{empty, absent, empty} {
			r := s.PostStripeEvent(t, payload)
			if r.Status != 400 || r.ErrorCode() != "invalid_event" || strings.Contains(string(r.Body), "duplicate") {
				t.Fatalf("id-less event %d: %d %s", i, r.Status, r.Body)
			}
		}
		if n := stripeEventCount(t, s); n != 0 {
			t.Fatalf("%d events recorded", n)
		}
	})
}

// TestStripeTopupFlagFollowsItsState: a top-up's flag says what its credit found, not what an earlier
// event said. A payment in euros flags the top-up "not credited"; its credit in dollars afterwards leaves
// no such flag (staff would credit it a second time by hand). And an event in euros about a top-up
// already credited does not flag it "not credited".
func TestStripeTopupFlagFollowsItsState(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "flags@example.com")
		u := accountOf(t, s, "flags@example.com")
		inEuros := func(top *models.Topup) map[string]any {
			sess := sessionObject(top, 920, "paid")
			sess["currency"] = "eur"
			return sess
		}

		first, _ := startTopup(t, s, b, url.Values{"amount": {"10"}})
		front.Object("GET /v1/checkout/sessions/"+*first.StripeSessionID, inEuros(first))
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_eur_first", "checkout.session.completed", inEuros(first))); r.Status != 200 {
			t.Fatalf("euros: %d %s", r.Status, r.Body)
		}
		if got := topupOf(t, s, first.ID); got.CreditedAt != nil || !strings.Contains(got.Flag, "not credited") {
			t.Fatalf("after a payment in euros: %+v", got)
		}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_usd_after", "checkout.session.async_payment_succeeded", sessionObject(first, 1000, "paid"))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("dollars: %d %s", r.Status, r.Body)
		}
		if got := topupOf(t, s, first.ID); got.CreditedMicros != 10_000_000 || strings.Contains(got.Flag, "not credited") {
			t.Fatalf("credited, and still flagged: %+v", got)
		}

		second := paidTopup(t, s, b, "10", 1000)
		front.Object("GET /v1/checkout/sessions/"+*second.StripeSessionID, inEuros(second))
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_eur_late", "checkout.session.async_payment_succeeded", inEuros(second))); r.Status != 200 {
			t.Fatalf("euros after the credit: %d %s", r.Status, r.Body)
		}
		if got := topupOf(t, s, second.ID); got.State != models.TopupCredited || got.Flag != "" {
			t.Fatalf("a credited top-up flagged by a later event: %+v", got)
		}
		if got := available(t, s, u.AccountID); got != 20_000_000 {
			t.Fatalf("available %d, want 20000000", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
