package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/billing/payments"
)

// brokenEvents is an event store that fails the way the real one must not.
type brokenEvents struct {
	record  func() (*payments.Received, error)
	process func() (string, error)
}

func (b brokenEvents) Record(context.Context, []byte, string) (*payments.Received, error) {
	return b.record()
}

func (b brokenEvents) Process(context.Context, string) (string, error) { return b.process() }

// TestStripeWebhookRecoversPanics: the webhook's work runs on its own goroutine, outside Fiber's recover,
// where a panic would end the whole process. A panic while recording or processing is logged and
// answered 500 (Stripe sends the event again), and the server goes on answering.
func TestStripeWebhookRecoversPanics(t *testing.T) {
	recorded := func() (*payments.Received, error) {
		return &payments.Received{EventID: "evt_1", Type: "charge.refunded", Outcome: "pending"}, nil
	}
	for _, tc := range []struct {
		name    string
		events  brokenEvents
		status  int
		code    string
		outcome string
	}{
		{"record panics", brokenEvents{record: func() (*payments.Received, error) { panic("record broke") }}, 500, "internal_error", ""},
		{"process panics", brokenEvents{record: recorded, process: func() (string, error) { panic("process broke") }}, 500, "internal_error", ""},
		{"process recovered its panic", brokenEvents{record: recorded, process: func() (string, error) {
			return "", fmt.Errorf("%w: effect broke", payments.ErrPanicked)
		}}, 500, "internal_error", ""},
		{"process failed", brokenEvents{record: recorded, process: func() (string, error) { return "", fmt.Errorf("database gone") }}, 200, "", "pending"},
		{"processed", brokenEvents{record: recorded, process: func() (string, error) { return "credited", nil }}, 200, "", "credited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := &handler{Deps: Deps{Log: slog.New(slog.NewTextHandler(&logs, nil)), WebhookTimeout: 2 * time.Second}}
			app := fiber.New()
			app.Post("/webhooks/stripe", func(c *fiber.Ctx) error { return h.receiveStripeEvent(c, tc.events) })
			for i := 0; i < 2; i++ { // the second delivery shows the server still answering
				res, err := app.Test(httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader(`{"id":"evt_1"}`)), 5000)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				var got struct {
					Outcome string
					Error   struct{ Code string }
				}
				_ = json.Unmarshal(body, &got)
				if res.StatusCode != tc.status || got.Error.Code != tc.code || got.Outcome != tc.outcome {
					t.Fatalf("%d %s", res.StatusCode, body)
				}
			}
			if tc.status == 500 && !strings.Contains(logs.String(), "panic") {
				t.Errorf("the panic is not logged:\n%s", logs.String())
			}
		})
	}
}
