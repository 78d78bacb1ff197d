package webhooks

import (
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
	"videogen/handlers/web"
)

// receiverFunc answers a delivery as payments.Receive would.
type receiverFunc func() (*payments.Received, error)

func (f receiverFunc) Receive(context.Context, []byte, string) (*payments.Received, error) {
	return f()
}

// TestStripeWebhookAnswers: each way payments.Receive can end becomes the answer Stripe needs — a panic
// it recovered (billing/payments' TestReceiveRecoversPanics) is 500 and Stripe sends the event again, a
// delivery not recorded 503, a recorded one 200 with its outcome — and the server goes on answering.
func TestStripeWebhookAnswers(t *testing.T) {
	recorded := &payments.Received{EventID: "evt_1", Type: "charge.refunded", Outcome: "pending"}
	for _, tc := range []struct {
		name    string
		receive receiverFunc
		status  int
		code    string
		outcome string
	}{
		{"record or process panicked", func() (*payments.Received, error) { return nil, fmt.Errorf("%w: record broke", payments.ErrPanicked) }, 500, "internal_error", ""},
		{"not recorded", func() (*payments.Received, error) {
			return nil, fmt.Errorf("%w: database gone", payments.ErrNotRecorded)
		}, 503, "try_again", ""},
		{"bad signature", func() (*payments.Received, error) { return nil, payments.ErrBadSignature }, 400, "bad_signature", ""},
		{"no id", func() (*payments.Received, error) { return nil, payments.ErrInvalidEvent }, 400, "invalid_event", ""},
		{"left pending", func() (*payments.Received, error) { return recorded, nil }, 200, "", "pending"},
		{"processed", func() (*payments.Received, error) {
			return &payments.Received{EventID: "evt_1", Type: "charge.refunded", Outcome: "credited"}, nil
		}, 200, "", "credited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &handler{Base: web.NewBase(web.Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})}
			app := fiber.New()
			app.Post("/webhooks/stripe", func(c *fiber.Ctx) error { return h.receiveStripeEvent(c, tc.receive) })
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
		})
	}
}
