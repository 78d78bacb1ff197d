package topups_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/internal/domain/accounts"
	"videogen/internal/testkit"
	"videogen/models"
)

var states = []string{topups.Pending, topups.Credited, topups.Failed, topups.Expired, topups.Canceled}

// TestTransitions: the table allows exactly the moves docs/stripe.md describes — out of pending to any
// end; a canceled Checkout still paid, failed or expired; anything not credited credited once Stripe says
// it collected the money — and nothing out of credited.
func TestTransitions(t *testing.T) {
	allowed := map[[2]string]bool{
		{topups.Pending, topups.Credited}: true, {topups.Pending, topups.Failed}: true, {topups.Pending, topups.Expired}: true,
		{topups.Pending, topups.Canceled}: true, {topups.Canceled, topups.Credited}: true, {topups.Canceled, topups.Failed}: true,
		{topups.Canceled, topups.Expired}: true, {topups.Failed, topups.Credited}: true, {topups.Expired, topups.Credited}: true,
	}
	for _, from := range states {
		for _, to := range states {
			if got := topups.CanMove(from, to); got != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s allowed: %v", from, to, got)
			}
		}
		if topups.Final(from) != (from == topups.Credited) {
			t.Errorf("%s final: %v", from, topups.Final(from))
		}
	}
}

// TestMovesFollowTheTable: each move, tried on a top-up in every state, happens exactly when the table
// allows it — the guard is in its UPDATE, so a move the table forbids changes nothing even when a caller
// asks — and only once: the second of two identical moves reports it did nothing.
func TestMovesFollowTheTable(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		u, err := accounts.Create(ctx, d, accounts.NewUser{Email: "payer@example.com", Verified: true})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		moves := map[string]func(tx *gorm.DB, id string) (bool, error){
			topups.Credited: func(tx *gorm.DB, id string) (bool, error) { return topups.Credit(tx, id, 10_000_000, "", nil, now) },
			topups.Failed:   func(tx *gorm.DB, id string) (bool, error) { return topups.Fail(tx, id, "declined", now) },
			topups.Expired:  func(tx *gorm.DB, id string) (bool, error) { return topups.Expire(tx, id, now) },
			topups.Canceled: func(tx *gorm.DB, id string) (bool, error) { return topups.Cancel(tx, u.AccountID, id, now) },
		}
		n := 0
		for _, from := range states {
			for to, move := range moves {
				n++
				id := fmt.Sprintf("topup_%d", n)
				row := &models.Topup{ID: id, AccountID: u.AccountID, Source: models.TopupCheckout, State: topups.Pending,
					AmountMicros: 10_000_000, CreatedAt: now, UpdatedAt: now}
				if err := topups.Create(d.W, row); err != nil {
					t.Fatal(err)
				}
				// Put it in the state under test as the store would have: credited with its stamp.
				set := map[string]any{"state": from}
				if from == topups.Credited {
					set["credited_at"] = now
				}
				if err := d.W.Model(&models.Topup{}).Where("id = ?", id).Updates(set).Error; err != nil {
					t.Fatal(err)
				}
				did, err := move(d.W, id)
				if err != nil {
					t.Fatal(err)
				}
				if did != topups.CanMove(from, to) {
					t.Errorf("%s → %s: moved %v, the table says %v", from, to, did, topups.CanMove(from, to))
				}
				var got models.Topup
				if err := d.R.Take(&got, "id = ?", id).Error; err != nil {
					t.Fatal(err)
				}
				want := from
				if did {
					want = to
				}
				if got.State != want {
					t.Errorf("%s → %s: state %s, want %s", from, to, got.State, want)
				}
				if again, err := move(d.W, id); err != nil || (again && !topups.CanMove(to, to)) {
					t.Errorf("%s → %s a second time: moved %v (%v)", from, to, again, err)
				}
			}
		}
		// A new top-up is pending, or nothing.
		if err := topups.Create(d.W, &models.Topup{ID: "topup_new", AccountID: u.AccountID, State: topups.Credited}); err == nil {
			t.Error("a top-up was created credited")
		}
	})
}
