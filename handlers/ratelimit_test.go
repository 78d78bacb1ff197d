package handlers_test

import (
	"strconv"
	"testing"

	"videogen/internal/testkit"
)

func TestRateLimitPerKey(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "RATE_LIMIT_RPS": "0.5", "RATE_LIMIT_BURST": "3"})
	acct := s.NewAccount(t, "0")
	other := s.NewAccount(t, "0")
	for i := 0; i < 3; i++ {
		if r := s.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatalf("request %d within the burst: %d", i+1, r.Status)
		}
	}
	r := s.Do(t, "GET", "/v1/models", acct.Key, nil)
	if r.Status != 429 || r.ErrorCode() != "rate_limited" {
		t.Fatalf("over the burst: %d %s", r.Status, r.Body)
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1 or 2 seconds at 0.5 requests/s", r.Header.Get("Retry-After"))
	}
	if r := s.Do(t, "GET", "/v1/models", other.Key, nil); r.Status != 200 {
		t.Fatalf("another key is limited by the first key's use: %d", r.Status)
	}
}

// TestRateLimitSharedInRedis: with REDIS_URL, two instances draw from one bucket per key.
func TestRateLimitSharedInRedis(t *testing.T) {
	dbURL := testkit.SQLiteURL(t)
	env := map[string]string{"WORKERS": "false", "RATE_LIMIT_RPS": "0.5", "RATE_LIMIT_BURST": "4", "REDIS_URL": "redis://127.0.0.1:6379/0"}
	one := testkit.Start(t, dbURL, env)
	two := testkit.Start(t, dbURL, env)
	acct := one.NewAccount(t, "0")
	for i := 0; i < 4; i++ {
		srv := one
		if i%2 == 1 {
			srv = two
		}
		if r := srv.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatalf("request %d within the shared burst: %d %s", i+1, r.Status, r.Body)
		}
	}
	for _, srv := range []*testkit.Server{one, two} {
		if r := srv.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 429 || r.ErrorCode() != "rate_limited" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("over the shared burst: %d %s", r.Status, r.Body)
		}
	}
}
