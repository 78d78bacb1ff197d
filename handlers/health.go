package handlers

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
)

// healthz answers while the process runs.
func (h *handler) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

// readyz answers 200 when the database is reachable and its schema current, else 503.
func (h *handler) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	if err := h.DB.Ready(ctx); err != nil {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "not_ready", "reason": err.Error()})
	}
	return c.JSON(fiber.Map{"status": "ready"})
}
