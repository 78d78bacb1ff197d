package apikeys_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/testkit"
)

// TestIssueRules: the one place the console and the CLI get their keys from refuses an unverified user
// and a bad name, and stores a good name trimmed.
func TestIssueRules(t *testing.T) {
	ctx := context.Background()
	d := testkit.OpenDB(t, testkit.SQLiteURL(t))
	verified, err := accounts.Create(ctx, d, accounts.NewUser{Email: "v@example.com", Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	unverified, err := accounts.Create(ctx, d, accounts.NewUser{Email: "u@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := apikeys.Issue(ctx, d, unverified, "laptop", time.Now()); !errors.Is(err, apikeys.ErrUnverified) {
		t.Fatalf("unverified user: %v", err)
	}
	for _, tc := range []struct {
		name, stored string
		err          error
	}{
		{"laptop", "laptop", nil},
		{"  padded  ", "padded", nil},
		{"", "", nil},
		{strings.Repeat("é", 60), strings.Repeat("é", 60), nil},
		{strings.Repeat("é", 61), "", apikeys.ErrBadName},
		{"tab\there", "", apikeys.ErrBadName},
		{"nul\x00", "", apikeys.ErrBadName},
		{"bad \xff utf-8", "", apikeys.ErrBadName},
	} {
		_, k, err := apikeys.Issue(ctx, d, verified, tc.name, time.Now())
		if !errors.Is(err, tc.err) {
			t.Errorf("%q: %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && k.Name != tc.stored {
			t.Errorf("%q stored as %q, want %q", tc.name, k.Name, tc.stored)
		}
	}
}
