package handlers

import "github.com/gofiber/fiber/v2"

// Stub: the platform overview (to be written).
func (h *handler) showOverview(c *fiber.Ctx) error { return fiber.ErrNotFound }
