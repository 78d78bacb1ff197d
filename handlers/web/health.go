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

// readyz answers 200 when the database is reachable and its schema current, else 503.
func (h *Base) Readyz(c *fiber.Ctx) error {
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
