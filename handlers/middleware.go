package handlers

import (
	"errors"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/apierr"
	"videogen/internal/apikeys"
	"videogen/internal/ids"
	"videogen/models"
)

// requestID gives every request a fresh id (never the client's, which could be forged into our logs).
func (h *handler) requestID(c *fiber.Ctx) error {
	rid := ids.NewRequestID()
	c.Locals(localRequestID, rid)
	c.Set("X-Request-Id", rid)
	return c.Next()
}

// recordCall writes the request's call-log row after the answer is rendered.
func (h *handler) recordCall(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	row := models.CallLog{
		// Microseconds, the database's precision, so the call log's page cursors match the stored times.
		At: start.UTC().Truncate(time.Microsecond), RequestID: requestID(c), Method: logText(c.Method(), 16), Path: logText(c.Path(), 1024),
		Status: c.Response().StatusCode(), ErrorCode: localString(c, localErrorCode),
		LatencyMicros: time.Since(start).Microseconds(), TaskID: logText(localString(c, localTaskID), 80),
		BytesIn: int64(len(c.Request().Body())),
	}
	if p, ok := c.Locals(localPrincipal).(apikeys.Principal); ok {
		acct := p.AccountID
		row.AccountID, row.KeyPrefix = &acct, p.KeyPrefix
	}
	if amt, ok := c.Locals(localAmount).(int64); ok {
		row.AmountReservedMicros = amt
	}
	h.CallLog.Record(row)
	return err
}

// renderErrors turns an error returned below it into the API error body, so that recordCall sees the
// final status and code.
func (h *handler) renderErrors(c *fiber.Ctx) error {
	if err := c.Next(); err != nil {
		return h.apiError(c, err)
	}
	return nil
}

func (h *handler) logPanic(c *fiber.Ctx, e any) {
	h.Log.Error("panic in handler", "request_id", requestID(c), "path", c.Path(), "panic", e, "stack", string(debug.Stack()))
}

// authenticate resolves the Bearer key to its account.
func (h *handler) authenticate(c *fiber.Ctx) error {
	auth := c.Get(fiber.HeaderAuthorization)
	if strings.TrimSpace(auth) == "" {
		return apierr.MissingAPIKey
	}
	scheme, secret, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return apierr.InvalidAPIKey
	}
	p, err := h.Keys.Authenticate(c.UserContext(), strings.TrimSpace(secret))
	if errors.Is(err, apikeys.ErrInvalid) {
		return apierr.InvalidAPIKey
	}
	if err != nil {
		return err
	}
	c.Locals(localPrincipal, p)
	return c.Next()
}

// limitRate applies the per-key token bucket.
func (h *handler) limitRate(c *fiber.Ctx) error {
	p := principal(c)
	ok, wait, err := h.Limiter.Allow(c.UserContext(), p.KeyPrefix)
	if err != nil {
		// Only a limiter without a fallback gets here: serve rather than fail every customer.
		h.Log.Warn("rate limiter unavailable", "err", err)
		return c.Next()
	}
	if !ok {
		return apierr.RateLimited(int(math.Ceil(wait.Seconds())))
	}
	return c.Next()
}

func principal(c *fiber.Ctx) apikeys.Principal {
	p, _ := c.Locals(localPrincipal).(apikeys.Principal)
	return p
}
