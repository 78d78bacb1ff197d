package payments_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/billing/payments"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestProcessSurvivesAPanic: a panic while an event is processed — here the clock, on the one call the
// test breaks — becomes ErrPanicked instead of ending the process (the webhook's goroutine and the
// event's job have no recover of Fiber's around them). The event stays pending, noted for a retry like
// any failure (its job retries it), and a later try processes it.
func TestProcessSurvivesAPanic(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		d, err := db.Open(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		if _, err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		var broken atomic.Bool
		clock := func() time.Time {
			if broken.CompareAndSwap(true, false) {
				panic("the clock broke")
			}
			return time.Now()
		}
		var logs bytes.Buffer
		s := payments.New(payments.Config{WebhookSecret: testkit.StripeWebhookSecret},
			payments.Deps{DB: d, Queue: idleQueue(t, d), Log: slog.New(slog.NewTextHandler(&logs, nil)), Now: clock})

		ev := testkit.StripeEvent("evt_panics", "customer.created", map[string]any{"id": "cus_1", "object": "customer"})
		got, err := s.Record(ctx, ev, testkit.SignStripe(ev, testkit.StripeWebhookSecret, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		broken.Store(true)
		out, err := s.Process(ctx, got.EventID)
		if !errors.Is(err, payments.ErrPanicked) || out != "" {
			t.Fatalf("Process of a panicking event: %q, %v", out, err)
		}
		if !strings.Contains(logs.String(), "Stripe event processing panicked") || !strings.Contains(logs.String(), "the clock broke") {
			t.Errorf("the panic is not logged:\n%s", logs.String())
		}
		var row models.StripeEvent
		if err := d.R.Take(&row, "id = ?", got.EventID).Error; err != nil {
			t.Fatal(err)
		}
		if row.State != models.EventPending || !strings.Contains(row.Note, "will retry") || !strings.Contains(row.Note, "panicked") {
			t.Fatalf("after the panic: %+v", row)
		}
		// The clock works again: the next try processes the event.
		if out, err := s.Process(ctx, got.EventID); err != nil || out != models.EventIgnored {
			t.Fatalf("retry: %q, %v", out, err)
		}
	})
}
