package web

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/infra/db"
)

// healthz answers while the process runs.
func (h *Base) Healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 when the instance should be sent requests: its database reachable and its schema
// current, and no shutdown begun; else 503 with the reason, which is what a proxy's active health check
// reads (deploy/Caddyfile). /healthz, the liveness check, keeps answering 200 meanwhile.
func (h *Base) Readyz(c *fiber.Ctx) error {
	if h.draining() {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "not_ready", "reason": "shutting down"})
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	if err := h.DB.Ready(ctx); err != nil {
		// The detail (host, user, database) is for the operator's log, not for whoever asks.
		h.Log.Warn("not ready", "err", err)
		reason := "database unreachable"
		if errors.Is(err, db.ErrMigrationsPending) {
			reason = "migrations pending"
		}
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "not_ready", "reason": reason})
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

func (h *Base) draining() bool { return h.Draining != nil && h.Draining() }

// CloseWhileDraining asks, once a graceful shutdown has begun, that each answer close its connection:
// the proxy then opens its next connection to a replica still in rotation instead of reusing one that
// this instance is about to close under it. It asks after the route has answered: the drain may begin
// while a request is handled, and an answer that saw it (/readyz's 503) must carry the close too.
func (h *Base) CloseWhileDraining(c *fiber.Ctx) error {
	err := c.Next()
	if h.draining() {
		c.Set(fiber.HeaderConnection, "close")
	}
	return err
}
