package billing_test

import (
	"context"
	"os"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/testkit"
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
