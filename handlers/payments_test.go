package handlers_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/audit"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

// stripeServer starts a server whose Stripe is stripe-mock behind a recording front.
func stripeServer(t *testing.T, dbURL string, over map[string]string) (*testkit.Server, *testkit.StripeFront) {
	t.Helper()
	front := testkit.NewStripeFront(t)
	env := front.Env()
	env["STRIPE_RECONCILE_INTERVAL"] = "0" // the tests reconcile when they mean to
	for k, v := range over {
		env[k] = v
	}
	return testkit.Start(t, dbURL, env), front
}

// startTopup submits the wallet's top-up form and returns the pending top-up it wrote.
func startTopup(t *testing.T, s *testkit.Server, b *browser, form url.Values) (*models.Topup, *page) {
	t.Helper()
	p := b.submit("/console/wallet", "amount", form)
	if p.Status != 303 {
		t.Fatalf("top-up form: %d %s", p.Status, p.Body)
	}
	var top models.Topup
	if err := s.DB.R.Order("created_at DESC").Take(&top).Error; err != nil {
		t.Fatal(err)
	}
	return &top, p
}

// sessionObject is a Checkout Session as Stripe sends it in events about a top-up.
func sessionObject(top *models.Topup, amountCents int64, paymentStatus string) map[string]any {
	return map[string]any{
		"id": *top.StripeSessionID, "object": "checkout.session", "mode": "payment", "currency": "usd",
		"amount_total": amountCents, "payment_status": paymentStatus, "status": "complete",
		"client_reference_id": top.ID, "payment_intent": "pi_" + top.ID,
		"metadata": map[string]any{"topup_id": top.ID, "account_id": fmt.Sprint(top.AccountID)},
	}
}

func ledgerKinds(t *testing.T, s *testkit.Server, accountID int64, kind string) []models.LedgerEntry {
	t.Helper()
	var es []models.LedgerEntry
	if err := s.DB.R.Where("account_id = ? AND kind = ?", accountID, kind).Order("id").Find(&es).Error; err != nil {
		t.Fatal(err)
	}
	return es
}

func available(t *testing.T, s *testkit.Server, accountID int64) int64 {
	t.Helper()
	var a models.Account
	if err := s.DB.R.Take(&a, accountID).Error; err != nil {
		t.Fatal(err)
	}
	return a.AvailableMicros
}

func accountOf(t *testing.T, s *testkit.Server, email string) models.User {
	t.Helper()
	var u models.User
	if err := s.DB.R.Where("email = ?", email).Take(&u).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCardTopUp(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "payer@example.com")
		u := accountOf(t, s, "payer@example.com")

		top, p := startTopup(t, s, b, url.Values{"amount": {"25.50"}, "save_card": {"1"}})
		if loc := p.location(); !strings.HasPrefix(loc, "https://checkout.stripe.com/") {
			t.Fatalf("the form sends the browser to %q, not to the session's page", loc)
		}
		if top.State != models.TopupPending || top.AmountMicros != 25_500_000 || top.StripeSessionID == nil || top.AccountID != u.AccountID {
			t.Fatalf("pending top-up: %+v", top)
		}
		// The session as docs/stripe.md describes it, created once per top-up.
		sessions := front.Calls("/v1/checkout/sessions")
		if len(sessions) != 1 {
			t.Fatalf("%d session creates: %+v", len(sessions), sessions)
		}
		f := sessions[0].Form
		customers := front.Calls("/v1/customers")
		if len(customers) != 1 || customers[0].IdempotencyKey == "" {
			t.Fatalf("customer creates: %+v", customers)
		}
		var prof models.BillingProfile
		if err := s.DB.R.Where("account_id = ?", u.AccountID).Take(&prof).Error; err != nil || prof.StripeCustomerID == nil {
			t.Fatalf("the customer id is not stored: %v %+v", err, prof)
		}
		for k, want := range map[string]string{
			"mode": "payment", "line_items[0][price_data][currency]": "usd", "line_items[0][price_data][unit_amount]": "2550",
			"line_items[0][quantity]": "1", "client_reference_id": top.ID, "metadata[topup_id]": top.ID,
			"metadata[account_id]": fmt.Sprint(u.AccountID), "customer": *prof.StripeCustomerID,
			"payment_intent_data[setup_future_usage]": "off_session",
			"success_url": s.Cfg.PublicBaseURL + "/console/wallet/topups/" + top.ID,
			"cancel_url":  s.Cfg.PublicBaseURL + "/console/wallet/topups/" + top.ID + "/canceled",
		} {
			if got := f.Get(k); got != want {
				t.Errorf("session %s = %q, want %q", k, got, want)
			}
		}
		if f.Get("line_items[0][price_data][product_data][name]") == "" {
			t.Error("the line item has no product name")
		}
		if sessions[0].IdempotencyKey != "videogen-checkout-"+top.ID || sessions[0].Authorization != "Bearer "+testkit.StripeKey {
			t.Errorf("session call headers: %+v", sessions[0])
		}

		// Back from Stripe before the webhook: nothing is credited, the page waits and reloads itself.
		ret := b.get("/console/wallet/topups/" + top.ID)
		ret.contains(t, "Waiting for Stripe to confirm", `http-equiv="refresh"`, "$0.00")
		if available(t, s, u.AccountID) != 0 {
			t.Fatal("the return page credited the wallet")
		}
		b.get("/console/wallet").contains(t, "Waiting for payment", "$25.50")

		// The webhook credits exactly what Stripe collected, once.
		ev := testkit.StripeEvent("evt_paid_"+top.ID, "checkout.session.completed", sessionObject(top, 2550, "paid"))
		if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"duplicate":true`) {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		async := testkit.StripeEvent("evt_async_"+top.ID, "checkout.session.async_payment_succeeded", sessionObject(top, 2550, "paid"))
		if r := s.PostStripeEvent(t, async); r.Status != 200 {
			t.Fatalf("async event: %d %s", r.Status, r.Body)
		}
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 1 || es[0].DeltaAvailable != 25_500_000 || *es[0].ExternalID != *top.StripeSessionID {
			t.Fatalf("topup entries: %+v", es)
		}
		if got := available(t, s, u.AccountID); got != 25_500_000 {
			t.Fatalf("available %d", got)
		}
		ret = b.get("/console/wallet/topups/" + top.ID)
		ret.contains(t, "Payment received", "$25.50 was added", `id="available">$25.50<`)
		ret.lacks(t, `http-equiv="refresh"`)
		b.get("/console/wallet").contains(t, "Paid and credited", "Top-up (card)")

		// The receipt: amount, new balance, Stripe's receipt link; and the card is kept for auto-recharge.
		mail := waitMail(t, s, "payer@example.com", "Payment received")
		if !strings.Contains(mail, "$25.50") || !strings.Contains(mail, "balance is now $25.50") {
			t.Errorf("receipt: %s", mail)
		}
		var credited models.Topup
		s.DB.R.Take(&credited, "id = ?", top.ID)
		if !strings.HasPrefix(credited.ReceiptURL, "https://") || !strings.Contains(mail, "View the receipt: "+credited.ReceiptURL) {
			t.Errorf("Stripe's receipt link %q is not in the receipt: %s", credited.ReceiptURL, mail)
		}
		if f.Get("adaptive_pricing[enabled]") != "false" {
			t.Errorf("Adaptive Pricing is not switched off: %q", f.Get("adaptive_pricing[enabled]"))
		}
		if err := s.DB.R.Where("account_id = ?", u.AccountID).Take(&prof).Error; err != nil || prof.PaymentMethodID == "" {
			t.Errorf("the saved card was not kept: %v %+v", err, prof)
		}

		// A second top-up reuses the Stripe customer.
		startTopup(t, s, b, url.Values{"preset": {"10"}})
		if n := len(front.Calls("/v1/customers")); n != 1 {
			t.Errorf("%d customers created for one account", n)
		}
		if got := front.Calls("/v1/checkout/sessions"); got[len(got)-1].Form.Get("line_items[0][price_data][unit_amount]") != "1000" {
			t.Errorf("the $10 preset asked for %s cents", got[len(got)-1].Form.Get("line_items[0][price_data][unit_amount]"))
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// waitMail waits for an e-mail to `to` whose subject contains subject, and returns its text.
func waitMail(t *testing.T, s *testkit.Server, to, subject string) string {
	t.Helper()
	var text string
	testkit.Eventually(t, 15*time.Second, fmt.Sprintf("an e-mail %q to %s", subject, to), func() bool {
		for _, m := range s.Mails.Messages() {
			if m.To == to && strings.Contains(m.Subject, subject) {
				text = m.Text
				return true
			}
		}
		s.Payments.CheckBalances(context.Background())
		return false
	})
	return text
}

// paidTopup starts a top-up of usd through the form and delivers its paid webhook.
func paidTopup(t *testing.T, s *testkit.Server, b *browser, usd string, cents int64) *models.Topup {
	t.Helper()
	top, _ := startTopup(t, s, b, url.Values{"amount": {usd}})
	if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_paid_"+top.ID, "checkout.session.completed", sessionObject(top, cents, "paid"))); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	return top
}

func stripeEventCount(t *testing.T, s *testkit.Server) int64 {
	t.Helper()
	var n int64
	if err := s.DB.R.Model(&models.StripeEvent{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStripeWebhookRefusesWhatStripeDidNotSign(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "sig@example.com")
		top, _ := startTopup(t, s, b, url.Values{"amount": {"20"}})
		ev := testkit.StripeEvent("evt_sig", "checkout.session.completed", sessionObject(top, 2000, "paid"))
		oldVersion := strings.Replace(string(ev), testkit.StripeAPIVersion, "2020-08-27", 1)
		for _, tc := range []struct {
			name      string
			payload   []byte
			signature string
		}{
			{"no signature", ev, ""},
			{"another secret", ev, testkit.SignStripe(ev, "whsec_someone_else", time.Now())},
			{"stale (10 minutes old)", ev, testkit.SignStripe(ev, testkit.StripeWebhookSecret, time.Now().Add(-10*time.Minute))},
			{"body changed after signing", []byte(strings.Replace(string(ev), "2000", "200000", 1)), testkit.SignStripe(ev, testkit.StripeWebhookSecret, time.Now())},
			{"garbage header", ev, "t=abc,v1=zzz"},
			{"another API version", []byte(oldVersion), testkit.SignStripe([]byte(oldVersion), testkit.StripeWebhookSecret, time.Now())},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.PostStripeRaw(t, tc.payload, tc.signature)
				if r.Status != 400 || r.ErrorCode() != "bad_signature" {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
			})
		}
		u := accountOf(t, s, "sig@example.com")
		if n := stripeEventCount(t, s); n != 0 || available(t, s, u.AccountID) != 0 {
			t.Fatalf("a refused event left %d events and available %d", n, available(t, s, u.AccountID))
		}
		// Signed, of a type we do not act on, or about a session that is not ours: 200, recorded, nothing moves.
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_other", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"ignored"`) {
			t.Fatalf("other type: %d %s", r.Status, r.Body)
		}
		foreign := map[string]any{"id": "cs_foreign", "object": "checkout.session", "amount_total": 5000, "currency": "usd", "payment_status": "paid"}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_foreign", "checkout.session.completed", foreign)); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"ignored"`) {
			t.Fatalf("unknown session: %d %s", r.Status, r.Body)
		}
		// A live-mode event on an installation with a test key (or the other way round) never credits.
		var live map[string]any
		_ = json.Unmarshal(ev, &live)
		live["livemode"], live["id"] = true, "evt_live"
		liveEv, _ := json.Marshal(live)
		if r := s.PostStripeEvent(t, liveEv); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"ignored"`) {
			t.Fatalf("live event: %d %s", r.Status, r.Body)
		}
		if len(ledgerKinds(t, s, u.AccountID, models.KindTopup)) != 0 {
			t.Fatal("something was credited")
		}
	})
}

func TestStripeCreditsEachPaymentExactlyOnce(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "once@example.com")
		u := accountOf(t, s, "once@example.com")

		// The same event from 20 deliveries at once.
		top, _ := startTopup(t, s, b, url.Values{"amount": {"30"}})
		ev := testkit.StripeEvent("evt_burst", "checkout.session.completed", sessionObject(top, 3000, "paid"))
		// completed and async_payment_succeeded for one session, at the same moment.
		top2, _ := startTopup(t, s, b, url.Values{"amount": {"12"}})
		completed := testkit.StripeEvent("evt_c2", "checkout.session.completed", sessionObject(top2, 1200, "paid"))
		async := testkit.StripeEvent("evt_a2", "checkout.session.async_payment_succeeded", sessionObject(top2, 1200, "paid"))
		errs := make(chan string, 22)
		start := make(chan struct{})
		post := func(payload []byte) {
			<-start
			if r := s.PostStripeEvent(t, payload); r.Status != 200 {
				errs <- fmt.Sprintf("%d %s", r.Status, r.Body)
			}
			errs <- ""
		}
		for i := 0; i < 20; i++ {
			go post(ev)
		}
		go post(completed)
		go post(async)
		close(start)
		for i := 0; i < 22; i++ {
			if e := <-errs; e != "" {
				t.Errorf("delivery: %s", e)
			}
		}
		es := ledgerKinds(t, s, u.AccountID, models.KindTopup)
		if len(es) != 2 || available(t, s, u.AccountID) != 42_000_000 {
			t.Fatalf("%d topup entries, available %d", len(es), available(t, s, u.AccountID))
		}

		// Out of order: the refund arrives before its payment. It waits, and applies once the payment is
		// known; neither is lost or doubled.
		top3, _ := startTopup(t, s, b, url.Values{"amount": {"50"}})
		charge := map[string]any{"id": "ch_" + top3.ID, "object": "charge", "amount": 5000, "amount_refunded": 2000, "currency": "usd",
			"payment_intent": "pi_" + top3.ID, "refunded": false,
			"refunds": map[string]any{"object": "list", "has_more": false, "data": []any{
				map[string]any{"id": "re_a_" + top3.ID, "object": "refund", "amount": 2000, "currency": "usd", "status": "succeeded", "charge": "ch_" + top3.ID},
			}}}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_r3", "charge.refunded", charge)); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"deferred"`) {
			t.Fatalf("early refund: %d %s", r.Status, r.Body)
		}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_p3", "checkout.session.completed", sessionObject(top3, 5000, "paid"))); r.Status != 200 {
			t.Fatalf("payment: %d %s", r.Status, r.Body)
		}
		if got := len(ledgerKinds(t, s, u.AccountID, models.KindTopup)); got != 3 {
			t.Fatalf("%d topup entries", got)
		}
		if rs := ledgerKinds(t, s, u.AccountID, models.KindRefund); len(rs) != 1 || rs[0].DeltaAvailable != -20_000_000 {
			t.Fatalf("refund entries after the payment arrived: %+v", rs)
		}
		if got := available(t, s, u.AccountID); got != 72_000_000 {
			t.Fatalf("available %d, want 72000000", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func TestStripeRefundsAndDisputes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "back@example.com")
		u := accountOf(t, s, "back@example.com")
		top := paidTopup(t, s, b, "40", 4000)
		chargeID := "ch_" + top.ID
		refund := func(id string, cents int64, status string) map[string]any {
			return map[string]any{"id": id, "object": "refund", "amount": cents, "currency": "usd", "status": status, "charge": chargeID}
		}
		charge := func(refunded int64, refunds ...map[string]any) map[string]any {
			c := map[string]any{"id": chargeID, "object": "charge", "amount": 4000, "amount_refunded": refunded, "currency": "usd", "payment_intent": "pi_" + top.ID}
			if refunds != nil {
				data := []any{}
				for _, r := range refunds {
					data = append(data, r)
				}
				c["refunds"] = map[string]any{"object": "list", "has_more": false, "data": data}
			}
			return c
		}
		// A first partial refund, then the event again, then a second refund: the later event carries the
		// refunded total so far and both refunds; each refund is debited once, by its id.
		r1 := refund("re_1_"+top.ID, 500, "succeeded")
		s.PostStripeEvent(t, testkit.StripeEvent("evt_ref1", "charge.refunded", charge(500, r1)))
		s.PostStripeEvent(t, testkit.StripeEvent("evt_ref1", "charge.refunded", charge(500, r1)))
		s.PostStripeEvent(t, testkit.StripeEvent("evt_ref2", "charge.refunded", charge(1200, r1, refund("re_2_"+top.ID, 700, "succeeded"), refund("re_x_"+top.ID, 900, "failed"))))
		if rs := ledgerKinds(t, s, u.AccountID, models.KindRefund); len(rs) != 2 || rs[0].DeltaAvailable != -5_000_000 || rs[1].DeltaAvailable != -7_000_000 {
			t.Fatalf("refund entries: %+v", rs)
		}
		// An event without the refund list (as API 2023-10-16 sends it): the refunds are listed from Stripe.
		front.List("GET /v1/refunds", []map[string]any{r1, refund("re_3_"+top.ID, 300, "succeeded")}, 1)
		s.PostStripeEvent(t, testkit.StripeEvent("evt_ref3", "charge.refunded", charge(1500)))
		if rs := ledgerKinds(t, s, u.AccountID, models.KindRefund); len(rs) != 3 || rs[2].DeltaAvailable != -3_000_000 {
			t.Fatalf("refund entries after a listed refund: %+v", rs)
		}
		if calls := front.Calls("/v1/refunds"); len(calls) != 2 || calls[0].Form.Get("charge") != chargeID {
			t.Fatalf("refund list calls: %+v", calls)
		}
		if got := available(t, s, u.AccountID); got != 25_000_000 {
			t.Fatalf("available %d after $15 of refunds", got)
		}

		// A dispute of the whole $40 takes available below zero: creates are refused with 402 and the
		// console says why and how much to add.
		dispute := map[string]any{"id": "dp_" + top.ID, "object": "dispute", "amount": 4000, "currency": "usd", "charge": chargeID,
			"payment_intent": "pi_" + top.ID, "status": "needs_response"}
		for i := 0; i < 2; i++ {
			if r := s.PostStripeEvent(t, testkit.StripeEvent(fmt.Sprintf("evt_dp_%d", i), "charge.dispute.created", dispute)); r.Status != 200 {
				t.Fatalf("dispute: %d %s", r.Status, r.Body)
			}
		}
		if ds := ledgerKinds(t, s, u.AccountID, models.KindDispute); len(ds) != 1 || available(t, s, u.AccountID) != -15_000_000 {
			t.Fatalf("dispute entries %+v, available %d", ds, available(t, s, u.AccountID))
		}
		key := createKey(t, b, "after-dispute")
		r := s.Do(t, "POST", "/v1/videos", key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "refused", "seconds": 4})
		if r.Status != 402 || r.ErrorCode() != "insufficient_balance" {
			t.Fatalf("create with a negative balance: %d %s", r.Status, r.Body)
		}
		for _, path := range []string{"/console", "/console/wallet"} {
			b.get(path).contains(t, "-$15.00", "refunded or disputed", "add at least $15.00")
		}

		// Won: the amount comes back once, however often Stripe says so.
		dispute["status"] = "won"
		for i := 0; i < 2; i++ {
			s.PostStripeEvent(t, testkit.StripeEvent(fmt.Sprintf("evt_dpw_%d", i), "charge.dispute.closed", dispute))
		}
		if ws := ledgerKinds(t, s, u.AccountID, models.KindDisputeWon); len(ws) != 1 || ws[0].DeltaAvailable != 40_000_000 || available(t, s, u.AccountID) != 25_000_000 {
			t.Fatalf("dispute won entries %+v, available %d", ws, available(t, s, u.AccountID))
		}
		b.get("/console/wallet").lacks(t, "refunded or disputed")

		// Out of order: a dispute closed as won before its opening event is applied books both at once
		// (net zero), and the late opening event changes nothing. A lost dispute whose opening event never
		// came is debited when it closes.
		top2 := paidTopup(t, s, b, "10", 1000)
		d2 := map[string]any{"id": "dp2_" + top2.ID, "object": "dispute", "amount": 1000, "currency": "usd", "payment_intent": "pi_" + top2.ID, "status": "won"}
		s.PostStripeEvent(t, testkit.StripeEvent("evt_d2_closed", "charge.dispute.closed", d2))
		d2["status"] = "needs_response"
		s.PostStripeEvent(t, testkit.StripeEvent("evt_d2_created", "charge.dispute.created", d2))
		if got := available(t, s, u.AccountID); got != 35_000_000 {
			t.Fatalf("available %d after a won dispute delivered backwards, want 35000000", got)
		}
		d3 := map[string]any{"id": "dp3_" + top2.ID, "object": "dispute", "amount": 400, "currency": "usd", "payment_intent": "pi_" + top2.ID, "status": "lost"}
		s.PostStripeEvent(t, testkit.StripeEvent("evt_d3_closed", "charge.dispute.closed", d3))
		if got := available(t, s, u.AccountID); got != 31_000_000 {
			t.Fatalf("available %d after a lost dispute never opened, want 31000000", got)
		}

		// A refund of a charge whose payment is unknown waits without asking Stripe anything.
		before := len(front.Calls("/v1/refunds"))
		r = s.PostStripeEvent(t, testkit.StripeEvent("evt_ref_unknown", "charge.refunded", map[string]any{"id": "ch_unknown", "object": "charge",
			"amount": 900, "amount_refunded": 900, "currency": "usd", "payment_intent": "pi_unknown"}))
		if !strings.Contains(string(r.Body), `"outcome":"deferred"`) || len(front.Calls("/v1/refunds")) != before {
			t.Fatalf("refund of an unknown payment: %s, %d refund lists", r.Body, len(front.Calls("/v1/refunds"))-before)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func TestTopupFormRefusesBadAmounts(t *testing.T) {
	s, front := stripeServer(t, testkit.SQLiteURL(t), map[string]string{"TOPUP_MIN": "5", "TOPUP_MAX": "1000"})
	b := signUpVerified(t, s, "amounts@example.com")
	for _, bad := range []string{"", "4.99", "1000.01", "25.001", "ten", "-10", "0", "1e3"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			p := b.submit("/console/wallet", "amount", url.Values{"amount": {bad}})
			if p.Status != 422 || !strings.Contains(p.Body, `id="amount-error"`) || !strings.Contains(p.Body, "between $5.00 and $1000.00") {
				t.Fatalf("%d %s", p.Status, p.Body)
			}
		})
	}
	for _, good := range []string{"5", "1000", "$25.50"} {
		if p := b.submit("/console/wallet", "amount", url.Values{"amount": {good}}); p.Status != 303 {
			t.Errorf("%q: %d", good, p.Status)
		}
	}
	if n := len(front.Calls("/v1/checkout/sessions")); n != 3 {
		t.Errorf("%d sessions for 3 good amounts", n)
	}
	var n int64
	s.DB.R.Model(&models.Topup{}).Count(&n)
	if n != 3 {
		t.Errorf("%d top-ups written for 3 good amounts", n)
	}

	// Only verified users of the account may top up.
	nb := newBrowser(t, s)
	nb.post("/signup", "/signup", url.Values{"email": {"unverified@example.com"}, "password": {"paper-boats-float-42"}, "terms": {"yes"}})
	nb.post("/signin", "/signin", url.Values{"email": {"unverified@example.com"}, "password": {"paper-boats-float-42"}})
	nb.get("/console/wallet").contains(t, "Confirm your e-mail address before you add funds")
	if p := nb.post("/console/wallet", "/console/wallet", url.Values{"amount": {"25"}}); p.Status != 403 {
		t.Errorf("unverified top-up: %d", p.Status)
	}
	if n := len(front.Calls("/v1/checkout/sessions")); n != 3 {
		t.Errorf("an unverified user created a session")
	}
}

func TestCheckoutThatEndsWithoutPayment(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "nopay@example.com")
		u := accountOf(t, s, "nopay@example.com")

		// The customer comes back through the cancel link.
		top, _ := startTopup(t, s, b, url.Values{"amount": {"15"}})
		b.get("/console/wallet/topups/"+top.ID+"/canceled").contains(t, "nothing was charged")
		b.get("/console/wallet").contains(t, "Canceled: nothing was charged")
		// An expired session and a failed delayed payment end their top-ups; neither credits.
		exp, _ := startTopup(t, s, b, url.Values{"amount": {"16"}})
		s.PostStripeEvent(t, testkit.StripeEvent("evt_exp", "checkout.session.expired", sessionObject(exp, 1600, "unpaid")))
		slow, _ := startTopup(t, s, b, url.Values{"amount": {"17"}})
		s.PostStripeEvent(t, testkit.StripeEvent("evt_slow", "checkout.session.completed", sessionObject(slow, 1700, "unpaid")))
		if available(t, s, u.AccountID) != 0 {
			t.Fatal("an unpaid session was credited")
		}
		b.get("/console/wallet/topups/"+slow.ID).contains(t, "Waiting for Stripe")
		s.PostStripeEvent(t, testkit.StripeEvent("evt_slow_f", "checkout.session.async_payment_failed", sessionObject(slow, 1700, "unpaid")))
		for id, want := range map[string]string{top.ID: models.TopupCanceled, exp.ID: models.TopupExpired, slow.ID: models.TopupFailed} {
			var got models.Topup
			s.DB.R.Take(&got, "id = ?", id)
			if got.State != want {
				t.Errorf("top-up %s is %s, want %s", id, got.State, want)
			}
		}
		b.get("/console/wallet/topups/"+slow.ID).contains(t, "did not go through")
		// After a minute of waiting the page stops reloading and says what happens next.
		pend, _ := startTopup(t, s, b, url.Values{"amount": {"18"}})
		p := b.get("/console/wallet/topups/" + pend.ID + "?wait=20")
		p.contains(t, "has not confirmed the payment")
		p.lacks(t, `http-equiv="refresh"`)
		if p := b.get("/console/wallet/topups/topup_nottherenottherenotthere"); p.Status != 404 {
			t.Errorf("unknown top-up: %d", p.Status)
		}
		// Another account cannot see this one's top-up.
		other := signUpVerified(t, s, "other@example.com")
		if p := other.get("/console/wallet/topups/" + top.ID); p.Status != 404 {
			t.Errorf("another account's top-up: %d", p.Status)
		}

		// A paid session whose amount differs from the top-up is credited as Stripe's API confirms it, and
		// flagged.
		odd, _ := startTopup(t, s, b, url.Values{"amount": {"25"}})
		front.Object("GET /v1/checkout/sessions/"+*odd.StripeSessionID, sessionObject(odd, 2000, "paid"))
		s.PostStripeEvent(t, testkit.StripeEvent("evt_odd", "checkout.session.completed", sessionObject(odd, 2000, "paid")))
		var got models.Topup
		s.DB.R.Take(&got, "id = ?", odd.ID)
		if got.CreditedMicros != 20_000_000 || !strings.Contains(got.Flag, "Stripe collected $20.00 for a top-up of $25.00") || available(t, s, u.AccountID) != 20_000_000 {
			t.Fatalf("mismatch: %+v, available %d", got, available(t, s, u.AccountID))
		}
		// The database itself refuses a second credit of the same session, whatever the code does.
		_, err := billing.Credit{AccountID: u.AccountID, Kind: models.KindTopup, Amount: money.PerUSD, ExternalID: *odd.StripeSessionID}.Apply(context.Background(), s.DB)
		if !errors.Is(err, billing.ErrDuplicateCredit) {
			t.Fatalf("a second credit of one session: %v", err)
		}
	})
}

// adjust moves an account's available balance as staff would (a debit may cross a threshold).
func adjust(t *testing.T, s *testkit.Server, accountID int64, usd string) {
	t.Helper()
	amt, err := money.ParseUSD(strings.TrimPrefix(usd, "-"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(usd, "-") {
		amt = -amt
	}
	if _, err := (billing.Adjustment{AccountID: accountID, Amount: amt, Reason: "test", AllowNegative: true, By: audit.Actor{Name: "test"}}).Apply(context.Background(), s.DB); err != nil {
		t.Fatal(err)
	}
}

func mailsAbout(s *testkit.Server, to, subject string) int {
	n := 0
	for _, m := range s.Mails.Messages() {
		if m.To == to && strings.Contains(m.Subject, subject) {
			n++
		}
	}
	return n
}

func TestLowBalanceWarningOncePerCrossing(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil) // no Stripe needed: the warning is about the balance
		b := signUpVerified(t, s, "low@example.com")
		u := accountOf(t, s, "low@example.com")
		adjust(t, s, u.AccountID, "5.20")
		if p := b.submit("/console/wallet", "low_balance", url.Values{"low_balance": {"abc"}}); p.Status != 422 || !strings.Contains(p.Body, `id="low_balance-error"`) {
			t.Fatalf("bad threshold: %d", p.Status)
		}
		if p := b.submit("/console/wallet", "low_balance", url.Values{"low_balance": {"5"}}); p.Status != 303 {
			t.Fatalf("save threshold: %d %s", p.Status, p.Body)
		}
		b.get("/console/wallet").contains(t, `value="5.00"`)
		key := createKey(t, b, "low")
		spend := func() {
			v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 6})
			s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed")
		}
		spend() // 4.90: under $5
		waitMail(t, s, "low@example.com", "balance is low")
		spend() // 4.60: still under, no second e-mail
		s.Payments.CheckBalances(context.Background())
		if n := mailsAbout(s, "low@example.com", "balance is low"); n != 1 {
			t.Fatalf("%d warnings for one crossing", n)
		}
		if m := waitMail(t, s, "low@example.com", "balance is low"); !strings.Contains(m, "$4.90") || !strings.Contains(m, "$5.00") {
			t.Errorf("warning text: %s", m)
		}
		adjust(t, s, u.AccountID, "1") // 5.60: back above, re-armed
		spend()                        // 5.30
		spend()                        // 5.00: not under
		s.Payments.CheckBalances(context.Background())
		if n := mailsAbout(s, "low@example.com", "balance is low"); n != 1 {
			t.Fatalf("%d warnings before the second crossing", n)
		}
		spend() // 4.70: the second crossing
		testkit.Eventually(t, 10*time.Second, "a second warning after the second crossing", func() bool {
			if mailsAbout(s, "low@example.com", "balance is low") >= 2 {
				return true
			}
			s.Payments.CheckBalances(context.Background())
			return false
		})
		if n := mailsAbout(s, "low@example.com", "balance is low"); n != 2 {
			t.Fatalf("%d warnings after two crossings", n)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func TestAutoRecharge(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, map[string]string{"AUTO_RECHARGE_MAX_PER_DAY": "2"})
		b := signUpVerified(t, s, "auto@example.com")
		u := accountOf(t, s, "auto@example.com")
		alerts := url.Values{"recharge": {"1"}, "recharge_below": {"10"}, "recharge_amount": {"25"}}

		// Without a saved card, auto-recharge cannot be switched on.
		if p := b.submit("/console/wallet", "recharge_below", alerts); p.Status != 422 || !strings.Contains(p.Body, "needs a saved card") {
			t.Fatalf("auto-recharge without a card: %d", p.Status)
		}
		top, _ := startTopup(t, s, b, url.Values{"amount": {"10.20"}, "save_card": {"1"}})
		s.PostStripeEvent(t, testkit.StripeEvent("evt_card", "checkout.session.completed", sessionObject(top, 1020, "paid")))
		waitMail(t, s, "auto@example.com", "Payment received") // the card is kept when the receipt goes
		if p := b.submit("/console/wallet", "recharge_below", alerts); p.Status != 303 {
			t.Fatalf("switch auto-recharge on: %d %s", p.Status, p.Body)
		}
		b.get("/console/wallet").contains(t, "ending in")

		// A charge takes available under $10: one off-session PaymentIntent, from its charge job.
		key := createKey(t, b, "auto")
		v := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 6})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed") // 9.90
		var prof models.BillingProfile
		s.DB.R.Where("account_id = ?", u.AccountID).Take(&prof)
		// Charged: the PaymentIntent requested, and stored on its top-up by the charge's job.
		charged := func(n int) func() bool {
			return func() bool {
				var stored int64
				s.DB.R.Model(&models.Topup{}).Where("source = ? AND stripe_payment_intent_id IS NOT NULL", models.TopupAutoRecharge).Count(&stored)
				return len(postCalls(front, "/v1/payment_intents")) == n && stored == int64(n)
			}
		}
		waitFor(t, s, "a recharge payment intent", charged(1))
		pis := postCalls(front, "/v1/payment_intents")
		var rt models.Topup
		s.DB.R.Where("source = ?", models.TopupAutoRecharge).Take(&rt)
		for k, want := range map[string]string{"amount": "2500", "currency": "usd", "off_session": "true", "confirm": "true",
			"customer": *prof.StripeCustomerID, "payment_method": prof.PaymentMethodID, "metadata[topup_id]": rt.ID, "metadata[source]": "auto_recharge"} {
			if got := pis[0].Form.Get(k); got != want {
				t.Errorf("payment intent %s = %q, want %q", k, got, want)
			}
		}
		if pis[0].IdempotencyKey != "videogen-recharge-"+rt.ID || rt.StripePaymentIntentID == nil {
			t.Fatalf("payment intent key %q, top-up %+v", pis[0].IdempotencyKey, rt)
		}
		// Another charge while still under: no second recharge for the same crossing.
		v = s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 6})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed") // 9.60
		s.Payments.CheckBalances(context.Background())
		if n := len(postCalls(front, "/v1/payment_intents")); n != 1 || available(t, s, u.AccountID) != 9_600_000 {
			t.Fatalf("%d payment intents for one crossing; available %d (credited before the webhook?)", n, available(t, s, u.AccountID))
		}
		// Only the webhook credits it, once per PaymentIntent.
		pi := map[string]any{"id": *rt.StripePaymentIntentID, "object": "payment_intent", "amount": 2500, "amount_received": 2500, "currency": "usd",
			"status": "succeeded", "metadata": map[string]any{"topup_id": rt.ID, "source": "auto_recharge"}}
		for i := 0; i < 2; i++ {
			s.PostStripeEvent(t, testkit.StripeEvent(fmt.Sprintf("evt_pi_ok_%d", i), "payment_intent.succeeded", pi))
		}
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 2 || available(t, s, u.AccountID) != 34_600_000 {
			t.Fatalf("%d topup entries, available %d", len(es), available(t, s, u.AccountID))
		}
		// A checkout's own PaymentIntent is not an auto-recharge: ignored.
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_pi_checkout", "payment_intent.succeeded", map[string]any{"id": "pi_" + top.ID, "object": "payment_intent",
			"amount_received": 1020, "currency": "usd", "metadata": map[string]any{"topup_id": top.ID, "source": "checkout"}})); !strings.Contains(string(r.Body), `"outcome":"ignored"`) {
			t.Fatalf("checkout payment intent: %s", r.Body)
		}

		waitMail(t, s, "auto@example.com", "Payment received: $25.00")

		// Money Stripe gives back never starts a recharge: a dispute of the first top-up takes available
		// from 34.60 to 24.40 and a refund to 9.40, under $10, and no card is charged for it.
		s.PostStripeEvent(t, testkit.StripeEvent("evt_dp_auto", "charge.dispute.created", map[string]any{"id": "dp_auto", "object": "dispute",
			"amount": 1020, "currency": "usd", "charge": "ch_auto", "payment_intent": "pi_" + top.ID, "status": "needs_response"}))
		s.PostStripeEvent(t, testkit.StripeEvent("evt_re_auto", "charge.refunded", map[string]any{"id": "ch_auto", "object": "charge", "amount": 1020,
			"amount_refunded": 1500, "currency": "usd", "payment_intent": "pi_" + top.ID, "refunds": map[string]any{"object": "list", "has_more": false,
				"data": []any{map[string]any{"id": "re_auto", "object": "refund", "amount": 1500, "currency": "usd", "status": "succeeded", "charge": "ch_auto"}}}}))
		s.Payments.CheckBalances(context.Background())
		if n := len(postCalls(front, "/v1/payment_intents")); n != 1 || available(t, s, u.AccountID) != 9_400_000 {
			t.Fatalf("after a dispute and a refund: %d payment intents, available %d", n, available(t, s, u.AccountID))
		}

		// A declined recharge switches auto-recharge off and tells the customer. (The next charge for a
		// video is the crossing: available was already under $10.)
		adjust(t, s, u.AccountID, "1") // 10.40: above, re-armed
		v = s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 12})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed") // 9.80
		waitFor(t, s, "a second recharge payment intent", charged(2))
		var rt2 models.Topup
		s.DB.R.Where("source = ? AND id <> ?", models.TopupAutoRecharge, rt.ID).Take(&rt2)
		declined := map[string]any{"id": *rt2.StripePaymentIntentID, "object": "payment_intent", "amount": 2500, "currency": "usd", "status": "requires_payment_method",
			"metadata": map[string]any{"topup_id": rt2.ID, "source": "auto_recharge"}, "last_payment_error": map[string]any{"message": "Your card was declined."}}
		s.PostStripeEvent(t, testkit.StripeEvent("evt_pi_no", "payment_intent.payment_failed", declined))
		s.DB.R.Where("account_id = ?", u.AccountID).Take(&prof)
		if prof.RechargeEnabled || !strings.Contains(prof.RechargeOffReason, "declined") {
			t.Fatalf("after a decline: %+v", prof)
		}
		if m := waitMail(t, s, "auto@example.com", "Auto-recharge is off"); !strings.Contains(m, "the payment failed: Your card was declined. We switched") {
			t.Errorf("decline e-mail: %s", m)
		}
		b.get("/console/wallet").contains(t, "Auto-recharge was switched off", "Payment failed")

		// The cap: two recharges in 24 hours are the most; the next crossing switches it off instead.
		adjust(t, s, u.AccountID, "1") // 10.80
		if p := b.submit("/console/wallet", "recharge_below", alerts); p.Status != 303 {
			t.Fatalf("switch on again: %d", p.Status)
		}
		v = s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 12})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed") // 10.20
		v = s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "spend", "seconds": 12})
		s.WaitStatus(t, key, v["id"].(string), 20*time.Second, "completed") // 9.60: the crossing
		waitFor(t, s, "a second e-mail that auto-recharge is off", func() bool { return mailsAbout(s, "auto@example.com", "Auto-recharge is off") == 2 })
		if n := len(postCalls(front, "/v1/payment_intents")); n != 2 {
			t.Fatalf("%d payment intents: the cap did not hold", n)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

func postCalls(front *testkit.StripeFront, prefix string) []testkit.StripeCall {
	var out []testkit.StripeCall
	for _, c := range front.Calls(prefix) {
		if c.Method == "POST" {
			out = append(out, c)
		}
	}
	return out
}

// waitFor looks at the balance crossings (the periodic balance_alerts job's work) until cond holds (at
// most 30 s: a retry may be 10 s away).
func waitFor(t *testing.T, s *testkit.Server, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, what, func() bool {
		if cond() {
			return true
		}
		s.Payments.CheckBalances(context.Background())
		return false
	})
}

// TestStripeWebhookAnswersInTimeWhenTheDatabaseIsSlow: a webhook waits at most STRIPE_WEBHOOK_TIMEOUT.
// Recorded but not processed in time, it is answered 200 and the event's job credits it once the
// database lets it; not even recorded, it is answered 503 so that Stripe sends it again.
func TestStripeWebhookAnswersInTimeWhenTheDatabaseIsSlow(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, map[string]string{"STRIPE_WEBHOOK_TIMEOUT": "1s"})
		b := signUpVerified(t, s, "slow@example.com")
		u := accountOf(t, s, "slow@example.com")
		top, _ := startTopup(t, s, b, url.Values{"amount": {"20"}})
		ev := testkit.StripeEvent("evt_slow_db", "checkout.session.completed", sessionObject(top, 2000, "paid"))

		other, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		tx := other.W.Begin()
		defer tx.Rollback()
		if s.DB.Postgres {
			// Another transaction holds the top-up's row: the event is recorded, its credit must wait.
			if err := tx.Exec("SELECT id FROM topups WHERE id = ? FOR UPDATE", top.ID).Error; err != nil {
				t.Fatal(err)
			}
		} else if err := tx.Exec("UPDATE topups SET updated_at = updated_at WHERE id = ?", top.ID).Error; err != nil {
			// SQLite has one writer: holding it means not even the event can be recorded.
			t.Fatal(err)
		}
		started := time.Now()
		r := s.PostStripeEvent(t, ev)
		took := time.Since(started)
		t.Logf("answered in %v", took)
		if took > 5*time.Second {
			t.Errorf("the webhook took %v with a 1s budget", took)
		}
		want, outcome := 200, `"outcome":"pending"`
		if !s.DB.Postgres {
			want, outcome = 503, `"try_again"`
		}
		if r.Status != want || !strings.Contains(string(r.Body), outcome) {
			t.Fatalf("webhook on a blocked database: %d %s", r.Status, r.Body)
		}
		tx.Rollback()
		if !s.DB.Postgres {
			if r := s.PostStripeEvent(t, ev); r.Status != 200 { // Stripe's retry
				t.Fatalf("retry: %d %s", r.Status, r.Body)
			}
		}
		waitFor(t, s, "the top-up credited once the database lets it", func() bool { return available(t, s, u.AccountID) == 20_000_000 })
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 1 {
			t.Fatalf("%d topup entries", len(es))
		}
	})
}

// TestStripeWebhookBodyLimit: the raw body is read up to the site's 1 MiB; a larger delivery is refused
// (and reaches Stripe as an answer) without anything being recorded.
func TestStripeWebhookBodyLimit(t *testing.T) {
	s, _ := stripeServer(t, testkit.SQLiteURL(t), nil)
	big := testkit.StripeEvent("evt_big", "customer.created", map[string]any{"id": "cus_big", "object": "customer",
		"description": strings.Repeat("x", 2<<20)})
	if r := s.PostStripeEvent(t, big); r.Status != 413 {
		t.Fatalf("a 2 MiB event: %d", r.Status)
	}
	if n := stripeEventCount(t, s); n != 0 {
		t.Fatalf("%d events recorded", n)
	}
}

// postStripeEncoded delivers payload signed as Stripe signs it (over the uncompressed bytes), with body
// sent as it is under the given Content-Encoding headers.
func postStripeEncoded(t *testing.T, s *testkit.Server, payload, body []byte, encodings ...string) *testkit.Resp {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", testkit.SignStripe(payload, testkit.StripeWebhookSecret, time.Now()))
	for _, e := range encodings {
		req.Header.Add("Content-Encoding", e)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("post Stripe event: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return &testkit.Resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// TestStripeWebhookRefusesCompressedBodies: Stripe never compresses its deliveries, and a compressed
// body would be inflated without limit before its signature is checked (a few hundred KiB of gzip are
// gigabytes): anyone may post here. Any Content-Encoding but identity is refused with 415 before the body
// is looked at, even when what it inflates to is a validly signed event, and nothing is recorded.
func TestStripeWebhookRefusesCompressedBodies(t *testing.T) {
	s, _ := stripeServer(t, testkit.SQLiteURL(t), nil)
	b := signUpVerified(t, s, "zip@example.com")
	u := accountOf(t, s, "zip@example.com")
	top, _ := startTopup(t, s, b, url.Values{"amount": {"20"}})
	ev := testkit.StripeEvent("evt_zip", "checkout.session.completed", sessionObject(top, 2000, "paid"))
	var gz, zl, bomb bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write(ev)
	w.Close()
	z := zlib.NewWriter(&zl)
	z.Write(ev)
	z.Close()
	w = gzip.NewWriter(&bomb)
	zeros := make([]byte, 1<<20)
	for range 64 { // 64 MiB in about 64 KiB
		w.Write(zeros)
	}
	w.Close()
	for _, tc := range []struct {
		name      string
		body      []byte
		encodings []string
	}{
		{"gzip", gz.Bytes(), []string{"gzip"}},
		{"deflate", zl.Bytes(), []string{"deflate"}},
		{"br", []byte("not really brotli"), []string{"br"}},
		{"gzip after identity", gz.Bytes(), []string{"identity, gzip"}},
		{"a second header", gz.Bytes(), []string{"identity", "GZIP"}},
		{"a gzip bomb", bomb.Bytes(), []string{"gzip"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := postStripeEncoded(t, s, ev, tc.body, tc.encodings...)
			if r.Status != 415 || r.ErrorCode() != "unsupported_content_type" {
				t.Fatalf("%d %s", r.Status, r.Body)
			}
		})
	}
	if n := stripeEventCount(t, s); n != 0 || available(t, s, u.AccountID) != 0 {
		t.Fatalf("a compressed delivery left %d events and available %d", n, available(t, s, u.AccountID))
	}
	// identity is no encoding: the same event sent plainly is credited.
	if r := postStripeEncoded(t, s, ev, ev, "identity"); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
		t.Fatalf("identity: %d %s", r.Status, r.Body)
	}
}

// TestStripeAsyncPaymentCredits: a delayed payment method completes the session unpaid (nothing is
// credited, the top-up waits) and async_payment_succeeded is the event that credits it — once, however
// often it is delivered.
func TestStripeAsyncPaymentCredits(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "sepa@example.com")
		u := accountOf(t, s, "sepa@example.com")
		top, _ := startTopup(t, s, b, url.Values{"amount": {"33.30"}})

		completed := testkit.StripeEvent("evt_sepa_completed", "checkout.session.completed", sessionObject(top, 3330, "unpaid"))
		if r := s.PostStripeEvent(t, completed); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"processed"`) {
			t.Fatalf("completed, unpaid: %d %s", r.Status, r.Body)
		}
		if got := topupOf(t, s, top.ID); got.State != models.TopupPending || got.CreditedAt != nil ||
			got.StripePaymentIntentID == nil || *got.StripePaymentIntentID != "pi_"+top.ID {
			t.Fatalf("after an unpaid completion: %+v", got)
		}
		if es := ledgerKinds(t, s, u.AccountID, models.KindTopup); len(es) != 0 || available(t, s, u.AccountID) != 0 {
			t.Fatalf("an unpaid completion credited: %+v", es)
		}
		b.get("/console/wallet/topups/"+top.ID).contains(t, "Waiting for Stripe to confirm")

		succeeded := testkit.StripeEvent("evt_sepa_paid", "checkout.session.async_payment_succeeded", sessionObject(top, 3330, "paid"))
		if r := s.PostStripeEvent(t, succeeded); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("async_payment_succeeded: %d %s", r.Status, r.Body)
		}
		// Stripe's retry of the same event, and the same news under another event id.
		if r := s.PostStripeEvent(t, succeeded); r.Status != 200 || !strings.Contains(string(r.Body), `"duplicate":true`) {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		again := testkit.StripeEvent("evt_sepa_paid_again", "checkout.session.async_payment_succeeded", sessionObject(top, 3330, "paid"))
		if r := s.PostStripeEvent(t, again); r.Status != 200 || strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("second event: %d %s", r.Status, r.Body)
		}
		es := ledgerKinds(t, s, u.AccountID, models.KindTopup)
		if len(es) != 1 || es[0].DeltaAvailable != 33_300_000 || *es[0].ExternalID != *top.StripeSessionID {
			t.Fatalf("topup entries: %+v", es)
		}
		if got := available(t, s, u.AccountID); got != 33_300_000 {
			t.Fatalf("available %d, want 33300000", got)
		}
		if got := topupOf(t, s, top.ID); got.State != models.TopupCredited || got.CreditedMicros != 33_300_000 || got.Flag != "" {
			t.Fatalf("credited top-up: %+v", got)
		}
		b.get("/console/wallet/topups/"+top.ID).contains(t, "Payment received", "$33.30 was added")
		testkit.CheckLedger(t, s.DB)
	})
}

func topupOf(t *testing.T, s *testkit.Server, id string) models.Topup {
	t.Helper()
	var top models.Topup
	if err := s.DB.R.Take(&top, "id = ?", id).Error; err != nil {
		t.Fatal(err)
	}
	return top
}

var presetRE = regexp.MustCompile(`<button[^>]*name="preset"[^>]*value="([^"]*)"`)

// TestTopupBoundsAndPresets: the custom amount is held to TOPUP_MIN and TOPUP_MAX (default $5 and
// $1,000), both ends included; the one-click presets ($10, $25, $100) are buttons of the top-up form
// whose values post a session of that amount, and only those within the bounds are offered — or taken.
func TestTopupBoundsAndPresets(t *testing.T) {
	for _, tc := range []struct {
		name                string
		env                 map[string]string
		refused, accepted   []string
		lo, hi              string // as the error message says them
		presets, notOffered []string
	}{
		{"configured", map[string]string{"TOPUP_MIN": "2", "TOPUP_MAX": "50"}, []string{"1.99", "50.01"}, []string{"2", "50"},
			"$2.00", "$50.00", []string{"10", "25"}, []string{"100"}},
		{"default", nil, []string{"4.99", "1000.01"}, []string{"5", "1000"},
			"$5.00", "$1000.00", []string{"10", "25", "100"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, front := stripeServer(t, testkit.SQLiteURL(t), tc.env)
			b := signUpVerified(t, s, "bounds@example.com")
			sessions := func() []testkit.StripeCall { return postCalls(front, "/v1/checkout/sessions") }
			for _, amount := range tc.refused {
				p := b.submit("/console/wallet", "amount", url.Values{"amount": {amount}})
				if p.Status != 422 || !strings.Contains(p.Body, "between "+tc.lo+" and "+tc.hi) {
					t.Errorf("%s: %d, want 422 naming %s to %s", amount, p.Status, tc.lo, tc.hi)
				}
			}
			if n := len(sessions()); n != 0 {
				t.Fatalf("%d sessions for refused amounts", n)
			}
			for _, amount := range tc.accepted {
				top, _ := startTopup(t, s, b, url.Values{"amount": {amount}})
				want, _ := money.ParseUSD(amount)
				got := sessions()
				if top.AmountMicros != int64(want) || got[len(got)-1].Form.Get("line_items[0][price_data][unit_amount]") != fmt.Sprint(int64(want)/10_000) {
					t.Errorf("%s: top-up of %d micros, session of %s cents", amount, top.AmountMicros, got[len(got)-1].Form.Get("line_items[0][price_data][unit_amount]"))
				}
			}

			// The presets are what the page offers, read from its markup, and each is sent as a browser sends
			// the button pressed: its name and value with the form's fields.
			var offered []string
			for _, m := range presetRE.FindAllStringSubmatch(b.get("/console/wallet").Body, -1) {
				offered = append(offered, m[1])
			}
			if strings.Join(offered, ",") != strings.Join(tc.presets, ",") {
				t.Fatalf("preset buttons %v, want %v", offered, tc.presets)
			}
			for _, v := range offered {
				before := len(sessions())
				top, _ := startTopup(t, s, b, url.Values{"preset": {v}})
				want, _ := money.ParseUSD(v)
				got := sessions()
				if len(got) != before+1 || top.AmountMicros != int64(want) ||
					got[len(got)-1].Form.Get("line_items[0][price_data][unit_amount]") != fmt.Sprint(int64(want)/10_000) {
					t.Errorf("preset %s: top-up %+v, %d sessions", v, top, len(got)-before)
				}
			}
			// A preset the page does not offer is refused like the amount it is.
			for _, v := range tc.notOffered {
				if p := b.submit("/console/wallet", "amount", url.Values{"preset": {v}}); p.Status != 422 {
					t.Errorf("preset %s outside the bounds: %d", v, p.Status)
				}
			}
		})
	}
}

// TestMismatchedCreditShownToStaff: a session that collected another amount than the top-up asked is
// credited as Stripe's API reports it, and the flag saying so is on the account's staff page.
func TestMismatchedCreditShownToStaff(t *testing.T) {
	s, front := stripeServer(t, testkit.SQLiteURL(t), nil)
	b := signUpVerified(t, s, "odd@example.com")
	u := accountOf(t, s, "odd@example.com")
	odd, _ := startTopup(t, s, b, url.Values{"amount": {"25"}})
	front.Object("GET /v1/checkout/sessions/"+*odd.StripeSessionID, sessionObject(odd, 2000, "paid"))
	if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_odd_staff", "checkout.session.completed", sessionObject(odd, 2000, "paid"))); r.Status != 200 {
		t.Fatalf("webhook: %d %s", r.Status, r.Body)
	}
	if available(t, s, u.AccountID) != 20_000_000 {
		t.Fatalf("available %d", available(t, s, u.AccountID))
	}
	st := signInStaff(t, s, "staff@example.com", models.RoleSupport)
	p := st.get(fmt.Sprintf("/support/accounts/%d", u.AccountID))
	if p.Status != 200 {
		t.Fatalf("staff account page: %d", p.Status)
	}
	p.contains(t, "Card payments", odd.ID, "Stripe collected $20.00 for a top-up of $25.00 (confirmed with Stripe&#39;s API): credited as Stripe reports")
}

// TestStripeNullsInEvents: a signed event Stripe would not send — a charge whose refund list holds a null
// entry, an event with no object — is handled (the null skipped, the event ignored), never a panic.
func TestStripeNullsInEvents(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "nulls@example.com")
		u := accountOf(t, s, "nulls@example.com")
		top := paidTopup(t, s, b, "40", 4000)
		chargeID := "ch_" + top.ID
		charge := func(refunded int64, data ...any) map[string]any {
			return map[string]any{"id": chargeID, "object": "charge", "amount": 4000, "amount_refunded": refunded, "currency": "usd",
				"payment_intent": "pi_" + top.ID, "refunds": map[string]any{"object": "list", "has_more": false, "data": data}}
		}
		refund := func(id string, cents int64) map[string]any {
			return map[string]any{"id": id, "object": "refund", "amount": cents, "currency": "usd", "status": "succeeded", "charge": chargeID}
		}
		// A null beside a refund: the refund is debited.
		r := s.PostStripeEvent(t, testkit.StripeEvent("evt_null_1", "charge.refunded", charge(500, nil, refund("re_n1_"+top.ID, 500))))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"processed"`) {
			t.Fatalf("a null beside a refund: %d %s", r.Status, r.Body)
		}
		// Only a null: no list at all, so the refunds are asked of Stripe.
		front.List("GET /v1/refunds", []map[string]any{refund("re_n1_"+top.ID, 500), refund("re_n2_"+top.ID, 700)}, 0)
		r = s.PostStripeEvent(t, testkit.StripeEvent("evt_null_2", "charge.refunded", charge(1200, nil)))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"processed"`) || len(front.Calls("/v1/refunds")) != 1 {
			t.Fatalf("only a null: %d %s, %d refund lists", r.Status, r.Body, len(front.Calls("/v1/refunds")))
		}
		if rs := ledgerKinds(t, s, u.AccountID, models.KindRefund); len(rs) != 2 || rs[0].DeltaAvailable != -5_000_000 || rs[1].DeltaAvailable != -7_000_000 {
			t.Fatalf("refund entries: %+v", rs)
		}
		// No object at all, in each of the event types that reads one.
		for _, typ := range []string{"checkout.session.completed", "charge.refunded", "charge.dispute.created", "payment_intent.succeeded"} {
			var ev map[string]any
			_ = json.Unmarshal(testkit.StripeEvent("evt_nodata_"+typ, typ, nil), &ev)
			delete(ev, "data")
			payload, _ := json.Marshal(ev)
			if r := s.PostStripeEvent(t, payload); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"ignored"`) {
				t.Fatalf("%s without data: %d %s", typ, r.Status, r.Body)
			}
		}
		if got := available(t, s, u.AccountID); got != 28_000_000 {
			t.Fatalf("available %d, want 28000000", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestStripeCreditAppliesOnlyItsOwnWaitingEvents: a credit applies at once the events that waited for
// its payment (a refund before it), and leaves other payments' waiting events to their own schedule —
// they are not re-run inside this webhook's time budget.
func TestStripeCreditAppliesOnlyItsOwnWaitingEvents(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, _ := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "own@example.com")
		u := accountOf(t, s, "own@example.com")
		mine, _ := startTopup(t, s, b, url.Values{"amount": {"50"}})
		refundOf := func(pi, id string, cents int64) map[string]any {
			return map[string]any{"id": "ch_" + id, "object": "charge", "amount": cents, "amount_refunded": cents, "currency": "usd", "payment_intent": pi,
				"refunds": map[string]any{"object": "list", "has_more": false, "data": []any{
					map[string]any{"id": "re_" + id, "object": "refund", "amount": cents, "currency": "usd", "status": "succeeded", "charge": "ch_" + id}}}}
		}
		for _, ev := range [][]byte{
			testkit.StripeEvent("evt_wait_mine", "charge.refunded", refundOf("pi_"+mine.ID, "mine", 1000)),
			testkit.StripeEvent("evt_wait_other", "charge.refunded", refundOf("pi_someone_else", "other", 900)),
		} {
			if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"deferred"`) {
				t.Fatalf("early refund: %d %s", r.Status, r.Body)
			}
		}
		event := func(id string) models.StripeEvent {
			var e models.StripeEvent
			if err := s.DB.R.Take(&e, "id = ?", id).Error; err != nil {
				t.Fatal(err)
			}
			return e
		}
		// A run of the other event would note it again ("waiting: …"): a note of the test's own shows none.
		if err := s.DB.W.Exec("UPDATE stripe_events SET note = ? WHERE id = ?", "untouched", "evt_wait_other").Error; err != nil {
			t.Fatal(err)
		}
		other := event("evt_wait_other")
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_pay_mine", "checkout.session.completed", sessionObject(mine, 5000, "paid"))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("payment: %d %s", r.Status, r.Body)
		}
		if e := event("evt_wait_mine"); e.State != models.EventProcessed {
			t.Errorf("the refund waiting for this payment is %s", e.State)
		}
		if rs := ledgerKinds(t, s, u.AccountID, models.KindRefund); len(rs) != 1 || rs[0].DeltaAvailable != -10_000_000 || available(t, s, u.AccountID) != 40_000_000 {
			t.Fatalf("refunds %+v, available %d", rs, available(t, s, u.AccountID))
		}
		if e := event("evt_wait_other"); e.State != models.EventPending || e.Note != other.Note {
			t.Errorf("another payment's waiting event was run again: %+v, before %+v", e, other)
		}
	})
}

// TestCheckoutWhoseSessionIDIsNotStored: the session was created, but the database refused to store its
// id. The customer goes on to pay it (nothing says "nothing was charged" of a payable session), the
// top-up stays pending, and the webhook finds it by the top-up id the session carries and credits it.
func TestCheckoutWhoseSessionIDIsNotStored(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s, front := stripeServer(t, dbURL, nil)
		b := signUpVerified(t, s, "unstored@example.com")
		u := accountOf(t, s, "unstored@example.com")
		refuse := []string{`CREATE TRIGGER refuse_session_id BEFORE UPDATE OF stripe_session_id ON topups
			BEGIN SELECT RAISE(ABORT, 'the test refuses session ids'); END`}
		allow := []string{"DROP TRIGGER refuse_session_id"}
		if s.DB.Postgres {
			refuse = []string{`CREATE FUNCTION refuse_session_id() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'the test refuses session ids'; END $$`,
				`CREATE TRIGGER refuse_session_id BEFORE UPDATE OF stripe_session_id ON topups FOR EACH ROW EXECUTE FUNCTION refuse_session_id()`}
			allow = []string{"DROP TRIGGER refuse_session_id ON topups"}
		}
		for _, q := range refuse {
			if err := s.DB.W.Exec(q).Error; err != nil {
				t.Fatal(err)
			}
		}
		p := b.submit("/console/wallet", "amount", url.Values{"amount": {"21"}})
		if p.Status != 303 || !strings.HasPrefix(p.location(), "https://checkout.stripe.com/") {
			t.Fatalf("top-up whose session id could not be stored: %d %s %s", p.Status, p.location(), trimPage(p.Body))
		}
		var top models.Topup
		if err := s.DB.R.Where("account_id = ?", u.AccountID).Take(&top).Error; err != nil {
			t.Fatal(err)
		}
		if top.State != models.TopupPending || top.StripeSessionID != nil || top.Failure != "" || len(postCalls(front, "/v1/checkout/sessions")) != 1 {
			t.Fatalf("top-up: %+v", top)
		}
		w := b.get("/console/wallet")
		w.contains(t, "Waiting for payment")
		w.lacks(t, "nothing was charged")

		for _, q := range allow {
			if err := s.DB.W.Exec(q).Error; err != nil {
				t.Fatal(err)
			}
		}
		sess := "cs_test_unstored_" + top.ID
		top.StripeSessionID = &sess
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_unstored", "checkout.session.completed", sessionObject(&top, 2100, "paid"))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if got := topupOf(t, s, top.ID); got.State != models.TopupCredited || got.StripeSessionID == nil || *got.StripeSessionID != sess {
			t.Fatalf("credited top-up: %+v", got)
		}
		if available(t, s, u.AccountID) != 21_000_000 {
			t.Fatalf("available %d", available(t, s, u.AccountID))
		}
	})
}
