package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/apikeys"
	"videogen/internal/testkit"
	"videogen/models"
)

func TestAPIKeys(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "API_KEY_CACHE_TTL": "2s"})
		acct := s.NewAccount(t, "10")
		// The typo changes the last character (a key that happened to end in "x" once made it no typo).
		typo := acct.Key[:len(acct.Key)-1] + "x"
		if strings.HasSuffix(acct.Key, "x") {
			typo = acct.Key[:len(acct.Key)-1] + "y"
		}
		for _, tc := range []struct {
			name, header, code string
		}{
			{"no header", "", "missing_api_key"},
			{"blank", "   ", "missing_api_key"},
			{"basic auth", "Basic dXNlcjpwYXNz", "invalid_api_key"},
			{"bearer without key", "Bearer ", "invalid_api_key"},
			{"unknown key", "Bearer vg_0000000000000000000000000000000000000000", "invalid_api_key"},
			{"not our format", "Bearer sk-abc", "invalid_api_key"},
			{"key with a typo", "Bearer " + typo, "invalid_api_key"},
		} {
			r := s.Do(t, "GET", "/v1/models", "", nil, "Authorization", tc.header)
			if r.Status != 401 || r.ErrorCode() != tc.code {
				t.Errorf("%s: %d %s, want 401 %s", tc.name, r.Status, r.Body, tc.code)
			}
		}
		if r := s.Do(t, "GET", "/v1/models", "", nil, "Authorization", "bearer "+acct.Key); r.Status != 200 {
			t.Fatalf("lower-case scheme: %d", r.Status)
		}

		// The secret is stored only as its SHA-256, with a short display prefix.
		var k models.APIKey
		s.DB.R.Where("account_id = ?", acct.ID).Take(&k)
		if k.SecretHash != apikeys.Hash(acct.Key) || k.Prefix != acct.Key[:11] || strings.Contains(k.SecretHash, acct.Key[11:]) {
			t.Fatalf("stored key %+v", k)
		}

		// Revoked by another instance (straight in the database): this instance's cache still knows the key
		// as valid for at most API_KEY_CACHE_TTL, then refuses it.
		if r := s.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatal("key refused before revocation")
		}
		if _, err := apikeys.Revoke(context.Background(), s.DB, k.Prefix, models.RevokedByCLI, time.Now()); err != nil {
			t.Fatal(err)
		}
		if r := s.Do(t, "GET", "/v1/models", acct.Key, nil); r.Status != 200 {
			t.Fatalf("within the cache lifetime the key is answered from memory, without a database lookup; got %d", r.Status)
		}
		testkit.Eventually(t, 5*time.Second, "the revoked key refused once the 2 s cache forgets it", func() bool {
			return s.Do(t, "GET", "/v1/models", acct.Key, nil).Status == 401
		})

		// Revoked on this instance: refused at once.
		acct2 := s.NewAccount(t, "10")
		if r := s.Do(t, "GET", "/v1/models", acct2.Key, nil); r.Status != 200 {
			t.Fatal("second key refused")
		}
		if err := s.Keys.Revoke(context.Background(), acct2.Key[:11], "owner@example.com"); err != nil {
			t.Fatal(err)
		}
		if r := s.Do(t, "GET", "/v1/models", acct2.Key, nil); r.Status != 401 || r.ErrorCode() != "invalid_api_key" {
			t.Fatalf("key revoked here still works: %d", r.Status)
		}
	})
}
