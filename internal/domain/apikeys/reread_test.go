package apikeys_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/apikeys"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
)

// TestAnswersRereadOffTheRequest: a key in steady use is never looked up on a request. Past half its
// lifetime an answer is still given from memory, and the request starts its reread in the background;
// a revocation made elsewhere is seen once that reread ends, and never later than the lifetime
// (API_KEY_CACHE_TTL), after which a request reads the key itself.
func TestAnswersRereadOffTheRequest(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "")
		const ttl = time.Hour
		a := apikeys.NewAuthenticator(d, ttl, time.Now)
		var aged atomic.Int64 // how much older than they are the answers look
		apikeys.SetAgeClock(a, func(t time.Time) time.Duration { return time.Since(t) + time.Duration(aged.Load()) })
		check := func(what string, wantErr error, wantStatements int64) {
			t.Helper()
			q := db.CountQueries(ctx)
			_, err := a.Authenticate(q, acct.Key)
			if !errors.Is(err, wantErr) {
				t.Fatalf("%s: %v, want %v", what, err, wantErr)
			}
			if q.N() != wantStatements {
				t.Fatalf("%s: the request ran %d statements, want %d", what, q.N(), wantStatements)
			}
		}
		check("first use", nil, 1)
		check("from memory", nil, 0)
		// Revoked by another instance.
		if _, err := apikeys.Revoke(ctx, d, acct.Key[:11], "cli", time.Now()); err != nil {
			t.Fatal(err)
		}
		check("a young answer", nil, 0)
		aged.Store(int64(ttl / 2))
		// From memory, while the reread this request started runs in the background; then refused.
		check("an answer past half its lifetime", nil, 0)
		testkit.Eventually(t, 30*time.Second, "the reread sees the revocation", func() bool {
			q := db.CountQueries(ctx)
			_, err := a.Authenticate(q, acct.Key)
			if q.N() != 0 {
				t.Fatalf("a request ran %d statements while its answer was within its lifetime", q.N())
			}
			return errors.Is(err, apikeys.ErrInvalid)
		})
		// At its lifetime an answer is not used: the request reads the key (or waits for the reread the
		// last request started, which may still run).
		aged.Store(int64(ttl))
		testkit.Eventually(t, 30*time.Second, "a request reads the key itself", func() bool {
			q := db.CountQueries(ctx)
			if _, err := a.Authenticate(q, acct.Key); !errors.Is(err, apikeys.ErrInvalid) {
				t.Fatalf("an answer past its lifetime: %v, want ErrInvalid", err)
			}
			return q.N() == 1
		})
	})
}

// TestZeroLifetimeCachesNothing: API_KEY_CACHE_TTL=0 reads the key on every request.
func TestZeroLifetimeCachesNothing(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "")
		a := apikeys.NewAuthenticator(d, 0, time.Now)
		for i := range 3 {
			q := db.CountQueries(context.Background())
			if _, err := a.Authenticate(q, acct.Key); err != nil || q.N() != 1 {
				t.Fatalf("request %d: %v, %d statements, want the key read", i, err, q.N())
			}
		}
	})
}
