package billing_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/testkit"
	"videogen/models"
)

// BenchmarkPricePerSecond is what a create pays to read its model's price from the database (the table
// is read per request so that a change shows at once on every instance), on SQLite and, with
// TEST_DATABASE_URL, PostgreSQL, from 8 goroutines per core as under load.
func BenchmarkPricePerSecond(b *testing.B) {
	engines := map[string]func(testing.TB) string{"sqlite": testkit.SQLiteURL}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		engines["postgres"] = testkit.PostgresURL
	}
	for name, url := range engines {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			d := testkit.OpenDB(b, url(b))
			if err := billing.SeedPrices(ctx, d, time.Now()); err != nil {
				b.Fatal(err)
			}
			p := billing.NewPrices(d)
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.PerSecond(ctx, "videogen-2.0-720p"); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// TestReadPriceEdits: an admin's price form read against the stored table, case by case.
func TestReadPriceEdits(t *testing.T) {
	stored := []models.Price{{Model: "videogen-2.0-480p", MicrosPerSecond: 150_000}, {Model: "videogen-2.0-720p", MicrosPerSecond: 300_000}}
	for _, tc := range []struct {
		name    string
		typed   map[string]string
		seen    map[string]string
		valid   bool
		changes []billing.PriceChange
		unknown []string
		errRow  string // the model whose row is in error
	}{
		{name: "nothing typed", valid: true},
		{name: "the same price again", typed: map[string]string{"videogen-2.0-480p": "0.15"}, valid: true},
		{name: "one change, spaces around", typed: map[string]string{"videogen-2.0-480p": " 0.2 "}, valid: true,
			changes: []billing.PriceChange{{Model: "videogen-2.0-480p", Old: 150_000, New: 200_000}}},
		{name: "based on the price the form was shown with", typed: map[string]string{"videogen-2.0-720p": "0.35"},
			seen: map[string]string{"videogen-2.0-720p": "250000"}, valid: true,
			changes: []billing.PriceChange{{Model: "videogen-2.0-720p", Old: 250_000, New: 350_000}}},
		{name: "typed back to what was seen, though stored differs", typed: map[string]string{"videogen-2.0-720p": "0.25"},
			seen: map[string]string{"videogen-2.0-720p": "250000"}, valid: true},
		{name: "unreadable", typed: map[string]string{"videogen-2.0-480p": "cheap"}, errRow: "videogen-2.0-480p"},
		{name: "zero", typed: map[string]string{"videogen-2.0-480p": "0"}, errRow: "videogen-2.0-480p"},
		{name: "empty", typed: map[string]string{"videogen-2.0-720p": ""}, errRow: "videogen-2.0-720p"},
		{name: "a model that does not exist", typed: map[string]string{"videogen-9": "1", "videogen-2.0-480p": "0.2"},
			unknown: []string{"videogen-9"}, changes: []billing.PriceChange{{Model: "videogen-2.0-480p", Old: 150_000, New: 200_000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := billing.ReadPriceEdits(stored, tc.typed, tc.seen)
			if e.Valid() != tc.valid || !slices.Equal(e.Changes, tc.changes) || !slices.Equal(e.Unknown, tc.unknown) || len(e.Rows) != len(stored) {
				t.Fatalf("got valid %v, changes %+v, unknown %v, %d rows", e.Valid(), e.Changes, e.Unknown, len(e.Rows))
			}
			for _, r := range e.Rows {
				if (r.Error != "") != (r.Model == tc.errRow) {
					t.Errorf("row %s: error %q", r.Model, r.Error)
				}
			}
		})
	}
}
