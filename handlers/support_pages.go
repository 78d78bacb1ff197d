package handlers

import "github.com/gofiber/fiber/v2"

// Stubs (being written).

func (h *handler) searchStaff(c *fiber.Ctx) error      { return fiber.ErrNotFound }
func (h *handler) showStaffCall(c *fiber.Ctx) error    { return fiber.ErrNotFound }
func (h *handler) showStaffTask(c *fiber.Ctx) error    { return fiber.ErrNotFound }
func (h *handler) showStaffAccount(c *fiber.Ctx) error { return fiber.ErrNotFound }
func (h *handler) showStaffLedger(c *fiber.Ctx) error  { return fiber.ErrNotFound }
func (h *handler) showAuditLog(c *fiber.Ctx) error     { return fiber.ErrNotFound }
