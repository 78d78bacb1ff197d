package handlers

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/billing/payments"
)

// stripeWebhook answers POST /webhooks/stripe: Stripe's signed events. No session, no CSRF token: the
// signature over the raw body is the authentication.
func (h *handler) stripeWebhook(c *fiber.Ctx) error {
	if !h.Payments.Enabled() {
		return webhookError(c, fiber.StatusNotFound, "not_configured", "Card payments are not configured on this installation.")
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
	body, signature := append([]byte(nil), c.Body()...), strings.Clone(c.Get("Stripe-Signature"))
	type recording struct {
		got *payments.Received
		err error
	}
	recorded, processed := make(chan recording, 1), make(chan string, 1)
	go func() {
		defer cancel()
		got, err := h.Payments.Record(ctx, body, signature)
		recorded <- recording{got, err}
		if err != nil {
			return
		}
		outcome, err := h.Payments.Process(ctx, got.EventID)
		if err != nil {
			h.Log.Warn("Stripe event left for the background job", "event", got.EventID, "type", got.Type, "err", err)
			outcome = "pending"
		}
		processed <- outcome
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
		return webhookError(c, fiber.StatusBadRequest, "bad_signature", "The Stripe-Signature header is missing, wrong or too old, or the event's API version is not 2023-10-16.")
	case r.err != nil:
		h.Log.Error("Stripe webhook not recorded; Stripe will send it again", "request_id", requestID(c), "err", r.err)
		return webhookError(c, fiber.StatusServiceUnavailable, "try_again", "The event could not be recorded. Send it again.")
	}
	got := r.got
	select {
	case got.Outcome = <-processed:
	case <-ctx.Done():
		select {
		case got.Outcome = <-processed:
		default:
		}
	}
	return c.JSON(fiber.Map{"received": true, "id": got.EventID, "duplicate": got.Duplicate, "outcome": got.Outcome})
}

func webhookError(c *fiber.Ctx, status int, code, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"code": code, "message": msg}})
}
