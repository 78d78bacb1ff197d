package main_test

import (
	"context"
	"strings"
	"testing"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCLIKeyLimits: `keys create` takes --spend-limit-usd, --limit-period and --models (repeated or
// comma-separated) and stores them exactly; wrong values are refused by flag name, and no key is made.
func TestCLIKeyLimits(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL}
		if out, stderr, code := run(t, dir, env, "accounts", "create", "--email", "lim@example.com", "--password", "correct horse battery"); code != 0 {
			t.Fatalf("accounts create: %d %s%s", code, out, stderr)
		}
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		key := func(secret string) models.APIKey {
			t.Helper()
			var k models.APIKey
			if err := d.R.Where("prefix = ?", secret[:11]).Take(&k).Error; err != nil {
				t.Fatal(err)
			}
			return k
		}

		secret, stderr, code := run(t, dir, env, "keys", "create", "--email", "lim@example.com", "--name", "capped",
			"--spend-limit-usd", "5", "--limit-period", "day", "--models", "videogen-2.0-mini-480p", "--models", "videogen-2.0-720p")
		secret = strings.TrimSpace(secret)
		if code != 0 || !strings.HasPrefix(secret, "vg_") || strings.Contains(secret, "\n") ||
			!strings.Contains(stderr, "limited to $5.00 per day, for videogen-2.0-720p, videogen-2.0-mini-480p only") {
			t.Fatalf("keys create with limits: exit %d, stdout %q, stderr %q", code, secret, stderr)
		}
		if k := key(secret); k.SpendLimitMicros == nil || *k.SpendLimitMicros != 5_000_000 || k.LimitPeriod != "day" ||
			k.AllowedModels != "videogen-2.0-720p,videogen-2.0-mini-480p" {
			t.Fatalf("stored %v %q %q", k.SpendLimitMicros, k.LimitPeriod, k.AllowedModels)
		}
		secret, _, code = run(t, dir, env, "keys", "create", "--email", "lim@example.com", "--spend-limit-usd", "$12.345678",
			"--limit-period", "month", "--models", "videogen-2.0-1080p,videogen-2.0-480p")
		if k := key(strings.TrimSpace(secret)); code != 0 || *k.SpendLimitMicros != 12_345_678 || k.LimitPeriod != "month" ||
			k.AllowedModels != "videogen-2.0-480p,videogen-2.0-1080p" {
			t.Fatalf("comma-separated models: exit %d, stored %v %q %q", code, k.SpendLimitMicros, k.LimitPeriod, k.AllowedModels)
		}

		keys := func() int64 {
			var n int64
			d.R.Model(&models.APIKey{}).Count(&n)
			return n
		}
		before := keys()
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--spend-limit-usd=-5", "--limit-period", "day"}, "--spend-limit-usd: a spend limit must be more than $0"},
			{[]string{"--spend-limit-usd", "0", "--limit-period", "day"}, "--spend-limit-usd: a spend limit must be more than $0"},
			{[]string{"--spend-limit-usd", "five", "--limit-period", "day"}, "--spend-limit-usd: give the limit in us dollars"},
			{[]string{"--spend-limit-usd", "0.0000001", "--limit-period", "day"}, "--spend-limit-usd: give the limit in us dollars"},
			{[]string{"--spend-limit-usd", "5"}, "--limit-period: choose whether the limit counts per day or per month"},
			{[]string{"--spend-limit-usd", "5", "--limit-period", "week"}, "--limit-period: the period is day or month"},
			{[]string{"--limit-period", "day"}, "--limit-period needs --spend-limit-usd"},
			{[]string{"--models", "videogen-2.0-720p", "--models", "sora-2"}, `--models: "sora-2" is not a model`},
		} {
			args := append([]string{"keys", "create", "--email", "lim@example.com"}, tc.args...)
			out, stderr, code := run(t, dir, env, args...)
			if code == 0 || out != "" || !strings.Contains(strings.ToLower(stderr), strings.ToLower(tc.want)) {
				t.Errorf("%v: exit %d stdout %q stderr %q, want non-zero exit and %q on stderr", tc.args, code, out, stderr, tc.want)
			}
		}
		if n := keys(); n != before {
			t.Fatalf("%d keys made by refused commands", n-before)
		}
	})
}
