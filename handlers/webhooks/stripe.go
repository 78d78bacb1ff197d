package webhooks

import (
	"videogen/handlers/web"

	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/billing/payments"
)

// stripeWebhook answers POST /webhooks/stripe: Stripe's signed events. No session, no CSRF token: the
// signature over the raw body is the authentication. payments.Receive records and processes the event
// within the webhook's time budget; this says how it went in Stripe's terms.
func (h *handler) stripeWebhook(c *fiber.Ctx) error {
	if !h.Payments.Enabled() {
		return webhookError(c, fiber.StatusNotFound, "not_configured", "Card payments are not configured on this installation.")
	}
	return h.receiveStripeEvent(c, h.Payments)
}

// stripeReceiver is what the webhook needs of payments: a test gives one that fails as the real one may.
type stripeReceiver interface {
	Receive(ctx context.Context, payload []byte, signature string) (*payments.Received, error)
}

func (h *handler) receiveStripeEvent(c *fiber.Ctx, events stripeReceiver) error {
	// Stripe never compresses its deliveries, and Fiber's c.Body() would inflate a compressed body
	// without any limit before the signature is checked: 1 MiB of gzip is gigabytes of memory for anyone
	// who can reach this URL. The body is taken raw — the bytes Stripe signed — and any encoding refused.
	if enc := web.EncodedBody(c); enc != "" {
		h.Log.Warn("Stripe webhook refused: compressed body", "request_id", web.RequestID(c), "content_encoding", enc)
		return webhookError(c, fiber.StatusUnsupportedMediaType, "unsupported_content_type",
			fmt.Sprintf("Compressed request bodies (Content-Encoding: %s) are not accepted; send the body uncompressed.", enc))
	}
	// The work outlives this handler when the budget runs out: it gets copies, never Fiber's buffers.
	body, signature := bytes.Clone(c.Request().Body()), strings.Clone(c.Get("Stripe-Signature"))
	got, err := events.Receive(c.UserContext(), body, signature)
	switch {
	case errors.Is(err, payments.ErrBadSignature):
		h.Log.Warn("Stripe webhook refused", "request_id", web.RequestID(c), "err", err)
		return webhookError(c, fiber.StatusBadRequest, "bad_signature", "The Stripe-Signature header is missing, wrong, too old or dated ahead, or the event's API version is not 2023-10-16.")
	case errors.Is(err, payments.ErrInvalidEvent):
		h.Log.Warn("Stripe webhook refused", "request_id", web.RequestID(c), "err", err)
		return webhookError(c, fiber.StatusBadRequest, "invalid_event", "The event has no id.")
	case errors.Is(err, payments.ErrPanicked):
		return webhookError(c, fiber.StatusInternalServerError, "internal_error", "The event could not be processed. Send it again.")
	case err != nil:
		h.Log.Error("Stripe webhook not recorded; Stripe will send it again", "request_id", web.RequestID(c), "err", err)
		return webhookError(c, fiber.StatusServiceUnavailable, "try_again", "The event could not be recorded. Send it again.")
	}
	return c.JSON(fiber.Map{"received": true, "id": got.EventID, "duplicate": got.Duplicate, "outcome": got.Outcome})
}

func webhookError(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": msg}})
}
