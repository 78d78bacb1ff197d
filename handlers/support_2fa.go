package handlers

import "github.com/gofiber/fiber/v2"

// Stubs: the second factor's pages (to be written).

func (h *handler) showSecondFactor(c *fiber.Ctx) error  { return fiber.ErrNotFound }
func (h *handler) checkSecondFactor(c *fiber.Ctx) error { return fiber.ErrNotFound }
func (h *handler) showTOTPEnrolment(c *fiber.Ctx) error { return fiber.ErrNotFound }
func (h *handler) enrolTOTP(c *fiber.Ctx) error         { return fiber.ErrNotFound }
func (h *handler) newRecoveryCodes(c *fiber.Ctx) error  { return fiber.ErrNotFound }
