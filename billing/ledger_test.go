package billing_test

import (
	"context"
	"strings"
	"testing"

	"videogen/billing"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/audit"
	"videogen/internal/money"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestAdjustmentsAreAlwaysAudited: money moved by hand has one way in, Adjustment, which writes its audit
// row in the same transaction; the ledger's Credit refuses the kind, so no code path can make an
// unaudited adjustment. A debit below zero needs AllowNegative.
func TestAdjustmentsAreAlwaysAudited(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		u, err := accounts.Create(ctx, d, accounts.NewUser{Email: "books@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		count := func(model any, where string, args ...any) int64 {
			t.Helper()
			var n int64
			if err := d.R.Model(model).Where(where, args...).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		_, err = billing.Credit{AccountID: u.AccountID, Kind: models.KindAdjustment, Amount: 5 * money.PerUSD, Reason: "by hand", Actor: "someone"}.Apply(ctx, d)
		if err == nil || !strings.Contains(err.Error(), "billing.Adjustment") {
			t.Fatalf("Credit of kind adjustment: %v, want refused", err)
		}
		if n := count(&models.LedgerEntry{}, "account_id = ?", u.AccountID); n != 0 {
			t.Fatalf("the refused credit wrote %d entries", n)
		}

		debit := billing.Adjustment{AccountID: u.AccountID, Amount: -5 * money.PerUSD, Reason: "chargeback", By: audit.CLI}
		if _, err := debit.Apply(ctx, d); err != billing.ErrWouldGoNegative {
			t.Fatalf("a debit below zero without AllowNegative: %v", err)
		}
		debit.AllowNegative = true
		e, err := debit.Apply(ctx, d)
		if err != nil || e.AvailableAfter != -5_000_000 || e.Actor != "cli" || e.Kind != models.KindAdjustment {
			t.Fatalf("a debit below zero with AllowNegative: %+v, %v", e, err)
		}
		if n := count(&models.AuditEntry{}, "action = ? AND actor = ? AND reason = ? AND account_id = ?", audit.Debit, "cli", "chargeback", u.AccountID); n != 1 {
			t.Fatalf("%d audit rows for the debit, want 1", n)
		}
		testkit.CheckLedger(t, d)
	})
}
