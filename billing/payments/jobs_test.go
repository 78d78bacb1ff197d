package payments_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/billing/payments"
	"videogen/billing/topups"
	"videogen/internal/domain/accounts"
	"videogen/internal/money"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// The payments' jobs on a running server whose clock the test moves: each kind waits as it declares
// (docs/jobs.md, "Payments"), and what the customer sees comes out once.

// movedClock is real time moved forward by the test: the server stamps, and River schedules, by it.
type movedClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *movedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *movedClock) Move(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

func jobServer(t *testing.T, dbURL string) (*testkit.Server, *testkit.StripeFront, *movedClock) {
	t.Helper()
	front := testkit.NewStripeFront(t)
	env := front.Env()
	env["STRIPE_RECONCILE_INTERVAL"] = "0"
	clock := &movedClock{}
	return testkit.StartWith(t, dbURL, env, server.Options{Now: clock.Now}), front, clock
}

func buyer(t *testing.T, s *testkit.Server, email string) *models.User {
	t.Helper()
	u, err := accounts.Create(context.Background(), s.DB, accounts.NewUser{Email: email, Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// jobOf is the one job of kind whose args name id (an event's or a top-up's), as River has it now.
func jobOf(t *testing.T, s *testkit.Server, kind, id string) *rivertype.JobRow {
	t.Helper()
	res, err := s.Queue.Client().JobList(context.Background(), river.NewJobListParams().Kinds(kind).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	var found *rivertype.JobRow
	for _, j := range res.Jobs {
		var args map[string]string
		if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
			t.Fatal(err)
		}
		if args["event_id"] == id || args["topup_id"] == id {
			if found != nil {
				t.Fatalf("two %s jobs for %s", kind, id)
			}
			found = j
		}
	}
	if found == nil {
		t.Fatalf("no %s job for %s", kind, id)
	}
	return found
}

func snoozes(j *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(j.Metadata, &meta)
	return meta.Snoozes
}

// near reports whether got is want, give or take the time a try takes.
func near(got, want time.Duration) bool { return got >= want-time.Second && got <= want+time.Second }

func mailsTo(s *testkit.Server, to, subject string) int {
	n := 0
	for _, m := range s.Mails.Messages() {
		if m.To == to && strings.Contains(m.Subject, subject) {
			n++
		}
	}
	return n
}

// TestStripeEventJobRetriesOnItsSchedule: an event the webhook could not process (Stripe's API down
// while its amount had to be confirmed) is left to its job, due 10 s after it was recorded; the job's
// failure waits 5 s (the first step of backoff), and once Stripe answers the job credits the top-up and
// its receipt goes, once.
func TestStripeEventJobRetriesOnItsSchedule(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s, front, clock := jobServer(t, dbURL)
		u := buyer(t, s, "retried@example.com")
		id, _, err := s.Payments.StartCheckout(ctx, payments.Checkout{AccountID: u.AccountID, UserID: u.ID, Email: u.Email, Amount: 20 * money.PerUSD})
		if err != nil {
			t.Fatal(err)
		}
		top, err := s.Payments.Topup(ctx, u.AccountID, id)
		if err != nil {
			t.Fatal(err)
		}
		route := "GET /v1/checkout/sessions/" + *top.StripeSessionID
		front.Handle(route, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest) // not retried by stripe-go: one call per try
			_, _ = w.Write([]byte(`{"error":{"type":"api_error","message":"Stripe is down"}}`))
		})
		recorded := clock.Now()
		r := s.PostStripeEvent(t, testkit.StripeEvent("evt_retried", payments.EvSessionCompleted, session(top, 2500, "paid")))
		if r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"pending"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if j := jobOf(t, s, "stripe_event", "evt_retried"); j.State != rivertype.JobStateScheduled || !near(j.ScheduledAt.Sub(recorded), 10*time.Second) {
			t.Fatalf("the event's job: %s at %s, recorded at %s", j.State, j.ScheduledAt, recorded)
		}

		clock.Move(10 * time.Second)
		var failed *rivertype.JobRow
		testkit.Eventually(t, 20*time.Second, "the job's first try failed", func() bool {
			failed = jobOf(t, s, "stripe_event", "evt_retried")
			return len(failed.Errors) == 1 && failed.State != rivertype.JobStateRunning
		})
		if wait := failed.ScheduledAt.Sub(failed.Errors[0].At); !near(wait, 5*time.Second) || failed.Attempt != 1 {
			t.Errorf("after the first failure: attempt %d, next in %s, want 5s", failed.Attempt, wait)
		}
		if got, _ := s.Payments.Topup(ctx, u.AccountID, id); got.CreditedAt != nil {
			t.Fatalf("credited without Stripe's API: %+v", got)
		}

		front.Object(route, session(top, 2500, "paid")) // Stripe answers again
		clock.Move(5 * time.Second)
		testkit.Eventually(t, 20*time.Second, "the top-up credited by the job, and its receipt sent", func() bool {
			got, _ := s.Payments.Topup(ctx, u.AccountID, id)
			return got.State == models.TopupCredited && mailsTo(s, u.Email, "Payment received") == 1
		})
		testkit.Eventually(t, 20*time.Second, "the event's and the receipt's jobs completed", func() bool {
			return jobOf(t, s, "stripe_event", "evt_retried").State == rivertype.JobStateCompleted &&
				jobOf(t, s, "topup_receipt", id).State == rivertype.JobStateCompleted
		})
		if j := jobOf(t, s, "stripe_event", "evt_retried"); j.Attempt != 2 {
			t.Errorf("the event's job completed after %d attempts, want 2", j.Attempt)
		}
		if n := mailsTo(s, u.Email, "Payment received"); n != 1 {
			t.Errorf("%d receipts", n)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestWaitingEventSnoozes: a refund that comes before its payment is not a failure: its job snoozes on
// the events' backoff (5 s, then 10 s) without spending attempts, the payment's credit applies the refund
// at once, and the snoozed job then finds it done.
func TestWaitingEventSnoozes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s, _, clock := jobServer(t, dbURL)
		u := buyer(t, s, "early-refund@example.com")
		id, _, err := s.Payments.StartCheckout(ctx, payments.Checkout{AccountID: u.AccountID, UserID: u.ID, Email: u.Email, Amount: 20 * money.PerUSD})
		if err != nil {
			t.Fatal(err)
		}
		top, err := s.Payments.Topup(ctx, u.AccountID, id)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_early", payments.EvChargeRefunded, charge(top, 2000, "re_1", int64(500)))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"deferred"`) {
			t.Fatalf("early refund: %d %s", r.Status, r.Body)
		}
		for i, wait := range []time.Duration{5 * time.Second, 10 * time.Second} {
			clock.Move(10 * time.Second)
			var j *rivertype.JobRow
			testkit.Eventually(t, 20*time.Second, "the waiting event's job snoozed", func() bool {
				j = jobOf(t, s, "stripe_event", "evt_early")
				return snoozes(j) == i+1 && j.State != rivertype.JobStateRunning
			})
			if got := j.ScheduledAt.Sub(*j.AttemptedAt); !near(got, wait) || j.Attempt != 0 || len(j.Errors) != 0 {
				t.Errorf("snooze %d: attempt %d, %d errors, next in %s, want %s", i+1, j.Attempt, len(j.Errors), got, wait)
			}
		}
		if r := s.PostStripeEvent(t, testkit.StripeEvent("evt_paid", payments.EvSessionCompleted, session(top, 2000, "paid"))); r.Status != 200 ||
			!strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("payment: %d %s", r.Status, r.Body)
		}
		var e models.StripeEvent
		if err := s.DB.R.Take(&e, "id = ?", "evt_early").Error; err != nil || e.State != models.EventProcessed {
			t.Fatalf("the refund after its payment's credit: %+v, %v", e, err)
		}
		clock.Move(10 * time.Second)
		testkit.Eventually(t, 20*time.Second, "the snoozed job completed", func() bool {
			return jobOf(t, s, "stripe_event", "evt_early").State == rivertype.JobStateCompleted
		})
		var kinds []string
		if err := s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ?", u.AccountID).Order("id").Pluck("kind", &kinds).Error; err != nil {
			t.Fatal(err)
		}
		if strings.Join(kinds, " ") != "topup refund" {
			t.Errorf("ledger %q", kinds)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestRechargeChargeGivesUpAfterItsTries: an auto-recharge whose charge Stripe refuses for a reason
// other than the card is tried 8 times, on the events' backoff, one PaymentIntent request each under the
// same idempotency key; then the top-up fails, auto-recharge switches off and the customer is told, once.
func TestRechargeChargeGivesUpAfterItsTries(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s, front, clock := jobServer(t, dbURL)
		u := buyer(t, s, "recharged@example.com")
		front.Handle("POST /v1/payment_intents", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":{"type":"invalid_request_error","message":"No such customer"}}`))
		})
		now := clock.Now()
		if err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
			if err := topups.EnsureProfile(tx, u.AccountID, now); err != nil {
				return err
			}
			if err := topups.SetCustomer(tx, u.AccountID, "cus_recharged", now); err != nil {
				return err
			}
			return topups.SaveCard(tx, u.AccountID, "pm_recharged", "visa ending in 4242", now)
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Payments.SaveAlerts(ctx, u.AccountID, payments.Alerts{RechargeEnabled: true, RechargeBelow: 10 * money.PerUSD,
			RechargeAmount: 25 * money.PerUSD}); err != nil {
			t.Fatal(err)
		}
		// A charge's crossing, as billing's ledger marks it (the wallet holds nothing, under $10).
		if err := s.DB.Tx(ctx, func(tx *gorm.DB) error { return topups.BalanceFell(tx, u.AccountID, now, true) }); err != nil {
			t.Fatal(err)
		}
		var top models.Topup
		testkit.Eventually(t, 10*time.Second, "the auto-recharge started", func() bool {
			s.Payments.CheckBalances(ctx) // or the periodic job, whichever comes first
			return s.DB.R.Take(&top, "account_id = ? AND source = ?", u.AccountID, models.TopupAutoRecharge).Error == nil
		})
		charges := func() int {
			n := 0
			for _, c := range front.Calls("/v1/payment_intents") {
				if c.Method == http.MethodPost && c.IdempotencyKey == "videogen-recharge-"+top.ID {
					n++
				}
			}
			return n
		}
		for try := 1; try < 8; try++ {
			var j *rivertype.JobRow
			testkit.Eventually(t, 20*time.Second, "a failed charge", func() bool {
				j = jobOf(t, s, "recharge_charge", top.ID)
				return len(j.Errors) == try && j.State != rivertype.JobStateRunning
			})
			wait := 5 * time.Second << (try - 1)
			if got := j.ScheduledAt.Sub(j.Errors[try-1].At); !near(got, wait) {
				t.Errorf("after try %d the next in %s, want %s", try, got, wait)
			}
			clock.Move(wait)
		}
		testkit.Eventually(t, 20*time.Second, "the auto-recharge given up", func() bool {
			return jobOf(t, s, "recharge_charge", top.ID).State == rivertype.JobStateCompleted
		})
		got, err := s.Payments.Topup(ctx, u.AccountID, top.ID)
		if err != nil || got.State != models.TopupFailed || got.Failure != "Stripe could not be reached" {
			t.Fatalf("the auto-recharge: %+v, %v", got, err)
		}
		if p, err := s.Payments.Profile(ctx, u.AccountID); err != nil || p.RechargeEnabled || !strings.Contains(p.RechargeOffReason, "the payment failed") {
			t.Fatalf("the profile: %+v, %v", p, err)
		}
		testkit.Eventually(t, 20*time.Second, "the e-mail that auto-recharge is off", func() bool {
			return mailsTo(s, u.Email, "Auto-recharge is off") == 1
		})
		if n := charges(); n != 8 {
			t.Errorf("%d charge requests, want 8", n)
		}
	})
}
