package handlers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/billing/payments"
)

// stripeWebhookPath is where Stripe sends its events (docs/stripe.md).
const stripeWebhookPath = "/webhooks/stripe"

// stripeEvents is what the webhook needs of payments: Record, then Process. An interface so that a test
// can make it fail in ways the real one must not (a panic).
type stripeEvents interface {
	Record(ctx context.Context, payload []byte, signature string) (*payments.Received, error)
	Process(ctx context.Context, eventID string) (string, error)
}

// stripeWebhook answers POST /webhooks/stripe: Stripe's signed events. No session, no CSRF token: the
// signature over the raw body is the authentication.
func (h *handler) stripeWebhook(c *fiber.Ctx) error {
	if !h.Payments.Enabled() {
		return webhookError(c, fiber.StatusNotFound, "not_configured", "Card payments are not configured on this installation.")
	}
	return h.receiveStripeEvent(c, h.Payments)
}

// errWebhookPanic stands for a panic while a delivery was recorded or processed.
var errWebhookPanic = errors.New("the Stripe webhook panicked")

func (h *handler) receiveStripeEvent(c *fiber.Ctx, events stripeEvents) error {
	// Stripe never compresses its deliveries, and Fiber's c.Body() would inflate a compressed body
	// without any limit before the signature is checked: 1 MiB of gzip is gigabytes of memory for anyone
	// who can reach this URL. The body is taken raw — the bytes Stripe signed — and any encoding refused.
	if enc := encodedBody(c); enc != "" {
		h.Log.Warn("Stripe webhook refused: compressed body", "request_id", requestID(c), "content_encoding", enc)
		return webhookError(c, fiber.StatusUnsupportedMediaType, "unsupported_content_type",
			fmt.Sprintf("Compressed request bodies (Content-Encoding: %s) are not accepted; send the body uncompressed.", enc))
	}
	// Stripe gives up after about 10 s and sends again later. The event is recorded first (which must
	// succeed for a 200), then processed in what is left of the budget; whatever is not done by then the
	// background job finishes (docs/stripe.md). The answer never waits past the budget, even when the
	// database driver does not give up on time (SQLite's busy wait): the work runs on its own, and a
	// delivery not recorded by then is answered 503 — should it be recorded afterwards, Stripe's retry is
	// recognised as a replay.
	budget := h.WebhookTimeout
	if budget <= 0 {
		budget = 8 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	rid := requestID(c) // c is not to be touched from the work's goroutine
	body, signature := bytes.Clone(c.Request().Body()), strings.Clone(c.Get("Stripe-Signature"))
	type recording struct {
		got *payments.Received
		err error
	}
	type processing struct {
		outcome string
		err     error
	}
	recorded, processed := make(chan recording, 1), make(chan processing, 1)
	go func() {
		defer cancel()
		// The work runs outside Fiber's recover: a panic here would end the process. It is answered 500
		// instead (Stripe sends the event again); an event already recorded stays pending for the
		// background job, which Process guards the same way.
		owed := func(err error) { recorded <- recording{err: err} }
		defer func() {
			if p := recover(); p != nil {
				h.Log.Error("Stripe webhook panicked", "request_id", rid, "panic", p, "stack", string(debug.Stack()))
				owed(fmt.Errorf("%w: %v", errWebhookPanic, p))
			}
		}()
		got, err := events.Record(ctx, body, signature)
		recorded <- recording{got, err}
		if err != nil {
			return
		}
		owed = func(err error) { processed <- processing{err: err} }
		outcome, err := events.Process(ctx, got.EventID)
		processed <- processing{outcome, err}
	}()
	// The work cancels ctx when it ends, so ctx.Done may be ready together with its result: the result wins.
	var r recording
	select {
	case r = <-recorded:
	case <-ctx.Done():
		select {
		case r = <-recorded:
		default:
			r.err = ctx.Err()
		}
	}
	switch {
	case errors.Is(r.err, payments.ErrBadSignature):
		h.Log.Warn("Stripe webhook refused", "request_id", requestID(c), "err", r.err)
		return webhookError(c, fiber.StatusBadRequest, "bad_signature", "The Stripe-Signature header is missing, wrong, too old or dated ahead, or the event's API version is not 2023-10-16.")
	case errors.Is(r.err, payments.ErrInvalidEvent):
		h.Log.Warn("Stripe webhook refused", "request_id", requestID(c), "err", r.err)
		return webhookError(c, fiber.StatusBadRequest, "invalid_event", "The event has no id.")
	case errors.Is(r.err, errWebhookPanic):
		return webhookInternalError(c)
	case r.err != nil:
		h.Log.Error("Stripe webhook not recorded; Stripe will send it again", "request_id", requestID(c), "err", r.err)
		return webhookError(c, fiber.StatusServiceUnavailable, "try_again", "The event could not be recorded. Send it again.")
	}
	got := r.got
	var p processing
	select {
	case p = <-processed:
	case <-ctx.Done():
		select {
		case p = <-processed:
		default:
			p.outcome = "pending"
		}
	}
	switch {
	case errors.Is(p.err, errWebhookPanic), errors.Is(p.err, payments.ErrPanicked):
		// Recorded, and pending: the background job tries it again with backoff. Stripe's own retry is a
		// replay, processed again too.
		h.Log.Error("Stripe event not processed: it panicked", "request_id", requestID(c), "event", got.EventID, "type", got.Type, "err", p.err)
		return webhookInternalError(c)
	case p.err != nil:
		h.Log.Warn("Stripe event left for the background job", "event", got.EventID, "type", got.Type, "err", p.err)
		p.outcome = "pending"
	}
	got.Outcome = p.outcome
	return c.JSON(fiber.Map{"received": true, "id": got.EventID, "duplicate": got.Duplicate, "outcome": got.Outcome})
}

func webhookInternalError(c *fiber.Ctx) error {
	return webhookError(c, fiber.StatusInternalServerError, "internal_error", "The event could not be processed. Send it again.")
}

func webhookError(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": msg}})
}
