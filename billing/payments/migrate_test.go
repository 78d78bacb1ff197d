package payments_test

import (
	"context"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/billing"
	"videogen/billing/topups"
	"videogen/internal/domain/accounts"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/migrations"
	"videogen/models"
)

// onRiver is the migration that moved the payments' queued work onto River.
const onRiver = 33

// beforeOnRiver is the newest of our migrations older than onRiver (others' may be merged before it).
func beforeOnRiver(t *testing.T, postgres bool) int64 {
	t.Helper()
	dir := "sqlite"
	if postgres {
		dir = "postgres"
	}
	files, err := fs.Glob(migrations.FS, dir+"/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var newest int64
	for _, f := range files {
		v, err := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(f, dir+"/"), "_", 2)[0], 10, 64)
		if err == nil && v < onRiver && v > newest {
			newest = v
		}
	}
	return newest
}

// TestPendingPaymentsWorkSurvivesTheUpgrade: a database at the schema before the payments moved onto
// River holds, in the old shape, a Stripe event waiting for its retry, a credited top-up whose receipt
// was not sent and an auto-recharge not charged yet. After the upgrade a server processes the event
// (crediting its top-up, whose receipt then goes too), sends the receipt and charges the card — each
// exactly once.
func TestPendingPaymentsWorkSurvivesTheUpgrade(t *testing.T) {
	testkit.EachEmptyDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d, err := db.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.MigrateTo(ctx, beforeOnRiver(t, d.Postgres)); err != nil {
			t.Fatal(err)
		}
		user := func(email string) *models.User {
			u, err := accounts.Create(ctx, d, accounts.NewUser{Email: email, Verified: true})
			if err != nil {
				t.Fatal(err)
			}
			return u
		}
		paid, waiting, saver := user("paid@example.com"), user("waiting@example.com"), user("saver@example.com")
		now := time.Now().UTC().Truncate(time.Second)
		past := now.Add(-time.Minute)
		exec := func(sql string, args ...any) {
			t.Helper()
			if err := d.W.Exec(sql, args...).Error; err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		const columns = `INSERT INTO topups (id, account_id, user_id, source, state, amount_micros, credited_micros, stripe_session_id,
			stripe_payment_intent_id, receipt_due, attempts, next_attempt_at, created_at, updated_at, credited_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

		// Credited, its receipt due and tried twice already.
		exec(columns, "topup_receipt", paid.AccountID, paid.ID, models.TopupCheckout, models.TopupCredited, 15_000_000, 15_000_000,
			"cs_receipt", "pi_receipt", true, 2, past, past, past, past)
		if err := d.Tx(ctx, func(tx *gorm.DB) error {
			_, err := billing.Credit{AccountID: paid.AccountID, Kind: models.KindTopup, Amount: 15_000_000, ExternalID: "cs_receipt",
				Reason: "card top-up topup_receipt", Actor: "stripe", At: past}.ApplyIn(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}

		// A paid session's event, failed three times and due again.
		exec(columns, "topup_event", waiting.AccountID, waiting.ID, models.TopupCheckout, models.TopupPending, 20_000_000, 0,
			"cs_event", nil, false, 0, nil, past, past, nil)
		payload := testkit.StripeEvent("evt_waiting", "checkout.session.completed", map[string]any{
			"id": "cs_event", "object": "checkout.session", "mode": "payment", "currency": "usd", "amount_total": 2000,
			"payment_status": "paid", "status": "complete", "client_reference_id": "topup_event", "payment_intent": "pi_event",
			"metadata": map[string]any{"topup_id": "topup_event", "account_id": strconv.FormatInt(waiting.AccountID, 10), "source": "checkout"}})
		exec(`INSERT INTO stripe_events (id, type, payload, state, note, attempts, stripe_created, received_at, next_attempt_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, "evt_waiting", "checkout.session.completed", string(payload), models.EventPending,
			"will retry: the database was slow", 3, past, past, past)

		// An auto-recharge started from a crossing, its charge not made yet.
		if err := d.Tx(ctx, func(tx *gorm.DB) error {
			if err := topups.EnsureProfile(tx, saver.AccountID, past); err != nil {
				return err
			}
			if err := topups.SetCustomer(tx, saver.AccountID, "cus_saver", past); err != nil {
				return err
			}
			return topups.SaveCard(tx, saver.AccountID, "pm_saver", "visa ending in 4242", past)
		}); err != nil {
			t.Fatal(err)
		}
		exec(columns, "topup_recharge", saver.AccountID, nil, models.TopupAutoRecharge, models.TopupPending, 25_000_000, 0,
			nil, nil, false, 1, past, past, past, nil)

		if _, err := d.Migrate(ctx); err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		_ = d.Close()

		front := testkit.NewStripeFront(t)
		env := front.Env()
		env["STRIPE_RECONCILE_INTERVAL"] = "0"
		s := testkit.Start(t, dbURL, env)

		receipts := func(to string) int {
			n := 0
			for _, m := range s.Mails.Messages() {
				if m.To == to && strings.Contains(m.Subject, "Payment received") {
					n++
				}
			}
			return n
		}
		charges := func() int {
			n := 0
			for _, c := range front.Calls("/v1/payment_intents") {
				if c.Method == http.MethodPost && c.IdempotencyKey == "videogen-recharge-topup_recharge" {
					n++
				}
			}
			return n
		}
		var event models.StripeEvent
		testkit.Eventually(t, 30*time.Second, "the event processed, both receipts sent and the card charged", func() bool {
			if err := s.DB.R.Take(&event, "id = ?", "evt_waiting").Error; err != nil {
				t.Fatal(err)
			}
			return event.State == models.EventProcessed && receipts("paid@example.com") == 1 && receipts("waiting@example.com") == 1 && charges() == 1
		})
		// Every payments job has finished, none given up; then nothing has come twice.
		testkit.Eventually(t, 30*time.Second, "no payments job left to work", func() bool {
			var left int64
			if err := s.DB.R.Table("river_job").Where("queue = ? AND kind <> ? AND state NOT IN ?", "payments", "balance_alerts",
				[]string{"completed", "cancelled", "discarded"}).Count(&left).Error; err != nil {
				t.Fatal(err)
			}
			return left == 0
		})
		var kinds []string
		if err := s.DB.R.Table("river_job").Where("queue = ? AND state = ?", "payments", "completed").Order("kind").
			Pluck("kind", &kinds).Error; err != nil {
			t.Fatal(err)
		}
		kinds = slices.DeleteFunc(kinds, func(k string) bool { return k == "balance_alerts" })
		if strings.Join(kinds, " ") != "recharge_charge stripe_event topup_receipt topup_receipt" {
			t.Errorf("completed payments jobs: %q", kinds)
		}
		if n, m, c := receipts("paid@example.com"), receipts("waiting@example.com"), charges(); n != 1 || m != 1 || c != 1 {
			t.Errorf("%d and %d receipts, %d charges", n, m, c)
		}
		var credits int64
		if err := s.DB.R.Model(&models.LedgerEntry{}).Where("kind = ? AND external_id = ?", models.KindTopup, "cs_event").Count(&credits).Error; err != nil {
			t.Fatal(err)
		}
		var tops []models.Topup
		if err := s.DB.R.Order("id").Find(&tops).Error; err != nil {
			t.Fatal(err)
		}
		for _, top := range tops {
			if top.ReceiptDue {
				t.Errorf("top-up %s still owes its receipt", top.ID)
			}
			if top.ID == "topup_recharge" && (top.StripePaymentIntentID == nil || top.State != models.TopupPending) {
				t.Errorf("the auto-recharge after its charge: %+v", top)
			}
		}
		if credits != 1 {
			t.Errorf("the event's top-up credited %d times", credits)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
