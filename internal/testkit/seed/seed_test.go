package seed_test

import (
	"context"
	"os"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/testkit"
	"videogen/internal/testkit/seed"
)

// TestSeedKeepsTheLedgerAndItsShape: a seeded database passes the ledger audit the product runs on
// itself (balances are the sums of the entries, each task has its reserve and its settle or release), its
// accounts are of very different sizes, and a seed restricted to one account and a recent window holds
// exactly the rows the full seed has there. PostgreSQL only: the seed is SQL of PostgreSQL's.
func TestSeedKeepsTheLedgerAndItsShape(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set: the seed writes PostgreSQL's SQL")
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	spec := seed.Spec{Accounts: 200, Tasks: 20000, Calls: 60000, Now: now, TaskSpan: 365 * 24 * time.Hour, CallSpan: 89 * 24 * time.Hour}
	full := testkit.OpenDB(t, testkit.PostgresURL(t))
	sqlDB, _ := full.W.DB()
	res, err := seed.Seed(ctx, sqlDB, spec, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for table, want := range map[string]int64{"accounts": 200, "users": 200, "tasks": 20000, "call_logs": 60000, "topups": 200, "ledger_entries": 40200} {
		var n int64
		if err := full.R.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s: %d rows, want %d", table, n, want)
		}
	}
	problems, err := tasks.Audit(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("ledger audit: %s", p)
	}
	// A few accounts much bigger than the rest.
	var sizes []int64
	if err := full.R.Raw("SELECT COUNT(*) FROM tasks GROUP BY account_id ORDER BY COUNT(*) DESC").Scan(&sizes).Error; err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 150 || sizes[0] < 1000 || sizes[0] < 20*sizes[len(sizes)/2] {
		t.Errorf("accounts' sizes are not skewed: biggest %d, median %d, %d accounts with tasks", sizes[0], sizes[len(sizes)/2], len(sizes))
	}
	var biggest int64
	if err := full.R.Raw("SELECT account_id FROM tasks GROUP BY account_id ORDER BY COUNT(*) DESC LIMIT 1").Scan(&biggest).Error; err != nil {
		t.Fatal(err)
	}
	if biggest != res.AccountID(1) {
		t.Errorf("the biggest account is %d, not rank 1's %d", biggest, res.AccountID(1))
	}
	// Every call names its account's key, and a task of its account where it names one.
	var strays int64
	if err := full.R.Raw(`SELECT COUNT(*) FROM call_logs c LEFT JOIN api_keys k ON k.prefix = c.key_prefix LEFT JOIN tasks t ON t.id = c.task_id
		WHERE c.account_id IS NOT NULL AND (k.account_id IS DISTINCT FROM c.account_id OR (c.task_id <> '' AND t.account_id IS DISTINCT FROM c.account_id))`).Scan(&strays).Error; err != nil {
		t.Fatal(err)
	}
	if strays != 0 {
		t.Errorf("%d calls name another account's key or task", strays)
	}

	// The same account and window, alone.
	since := now.Add(-20 * 24 * time.Hour)
	spec.Only, spec.Since = []int{1, 7}, since
	part := testkit.OpenDB(t, testkit.PostgresURL(t))
	partSQL, _ := part.W.DB()
	if _, err := seed.Seed(ctx, partSQL, spec, t.Logf); err != nil {
		t.Fatal(err)
	}
	if problems, err := tasks.Audit(ctx, part); err != nil || len(problems) > 0 {
		t.Errorf("ledger audit of the partial seed: %v %v", problems, err)
	}
	for _, q := range []struct{ name, sql string }{
		{"tasks", "SELECT id || status || amount_micros || created_at::text FROM tasks WHERE account_id IN (?, ?) AND created_at >= ? ORDER BY 1"},
		{"calls", "SELECT request_id || path || status || at::text || key_prefix FROM call_logs WHERE account_id IN (?, ?) AND at >= ? ORDER BY 1"},
	} {
		var a, b []string
		if err := full.R.Raw(q.sql, res.AccountID(1), res.AccountID(7), since).Scan(&a).Error; err != nil {
			t.Fatal(err)
		}
		if err := part.R.Raw(q.sql, res.AccountID(1), res.AccountID(7), since).Scan(&b).Error; err != nil {
			t.Fatal(err)
		}
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s since %s: %d in the full seed, %d in the partial one", q.name, since, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s differ: %q in the full seed, %q in the partial one", q.name, a[i], b[i])
			}
		}
	}
	var others int64
	if err := part.R.Raw("SELECT COUNT(*) FROM tasks WHERE account_id NOT IN (?, ?) OR created_at < ?", res.AccountID(1), res.AccountID(7), since).Scan(&others).Error; err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("the partial seed wrote %d tasks outside its accounts and window", others)
	}
}
