package handlers

import "github.com/gofiber/fiber/v2"

// Stubs: what admins change (to be written).

func (h *handler) adjustBalance(c *fiber.Ctx) error  { return fiber.ErrNotFound }
func (h *handler) disableAccount(c *fiber.Ctx) error { return fiber.ErrNotFound }
func (h *handler) enableAccount(c *fiber.Ctx) error  { return fiber.ErrNotFound }
func (h *handler) setRole(c *fiber.Ctx) error        { return fiber.ErrNotFound }
func (h *handler) showPrices(c *fiber.Ctx) error     { return fiber.ErrNotFound }
func (h *handler) setPrices(c *fiber.Ctx) error      { return fiber.ErrNotFound }
