package apikeys_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"videogen/internal/domain/apikeys"
	"videogen/internal/testkit"
)

// TestDisabledAccount: a current key of a disabled account answers ErrAccountDisabled with its principal
// (a revoked one stays ErrInvalid); the answer is cached like any other, and ForgetAccount drops the
// account's entries so a change made on this instance holds at once.
func TestDisabledAccount(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "")
		other := testkit.NewAccount(t, d, "")
		revoked, k, err := apikeys.Create(ctx, d, acct.ID, "old", nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := apikeys.Revoke(ctx, d, k.Prefix, "cli", time.Now()); err != nil {
			t.Fatal(err)
		}
		a := apikeys.NewAuthenticator(d, time.Hour, time.Now)
		setDisabled := func(on bool) {
			t.Helper()
			var at any
			if on {
				at = time.Now().UTC()
			}
			if err := d.W.Exec("UPDATE accounts SET disabled_at = ? WHERE id = ?", at, acct.ID).Error; err != nil {
				t.Fatal(err)
			}
		}
		check := func(secret string, want error) {
			t.Helper()
			p, err := a.Authenticate(ctx, secret)
			if !errors.Is(err, want) && !(want == nil && err == nil) {
				t.Fatalf("authenticate: %v, want %v", err, want)
			}
			if want != apikeys.ErrInvalid && p.AccountID == 0 {
				t.Fatalf("no principal with %v", err)
			}
		}
		check(acct.Key, nil)
		check(other.Key, nil)
		setDisabled(true)
		check(acct.Key, nil) // cached for the TTL, as a revocation made elsewhere is
		a.ForgetAccount(acct.ID)
		check(acct.Key, apikeys.ErrAccountDisabled)
		check(revoked, apikeys.ErrInvalid)
		check(other.Key, nil)
		setDisabled(false)
		check(acct.Key, apikeys.ErrAccountDisabled) // the refusal is cached too
		a.ForgetAccount(acct.ID)
		check(acct.Key, nil)
	})
}
