package staffsearch_test

import (
	"context"
	"os"
	"testing"

	"videogen/internal/infra/db"
	"videogen/internal/staff/staffsearch"
	"videogen/internal/testkit"
)

// TestUsersSearchPlannedForItsPattern (PostgreSQL): the search by part of an address is planned for its
// pattern every time it runs. The driver prepares each statement once per connection, and PostgreSQL may
// then keep a generic plan, made without the pattern, which walks every user in address order (5.3 ms at
// 10,000 users, against 0.7 ms by the trigram index). Here the connection asks for generic plans of
// everything (plan_cache_mode=force_generic_plan), and PostgreSQL's own count of the prepared statement's
// plans (pg_prepared_statements, on that one connection) must show custom plans only.
func TestUsersSearchPlannedForItsPattern(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("TEST_DATABASE_URL is not set: the plans are PostgreSQL's")
	}
	ctx := context.Background()
	dbURL := testkit.PostgresURL(t)
	d, err := db.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	one, err := db.Open(ctx, dbURL+"&plan_cache_mode=force_generic_plan")
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	sqlDB, err := one.R.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1) // every search and the count below on one session
	for range 7 {
		if _, err := staffsearch.Find(ctx, one.R, "someone@example.com", staffsearch.Page{Limit: 25}); err != nil {
			t.Fatal(err)
		}
	}
	var plans []struct {
		Statement                 string
		GenericPlans, CustomPlans int64
	}
	if err := one.R.Raw(`SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '%lower(email) LIKE%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&plans).Error; err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 {
		t.Fatalf("%d prepared statements of the search on the connection, want 1: %+v", len(plans), plans)
	}
	if p := plans[0]; p.GenericPlans != 0 || p.CustomPlans != 7 {
		t.Errorf("the search was planned %d times without its pattern and %d times with it, want 0 and 7:\n%s", p.GenericPlans, p.CustomPlans, p.Statement)
	}
}
