package console

import (
	"videogen/handlers/web"

	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/views/customer"
)

func (h *Handler) showForgotPassword(c *fiber.Ctx) error {
	return h.Render(c, customer.ForgotPassword(h.Viewer(c, ""), "", false))
}

// requestPasswordReset e-mails a reset link when the address has an account; the answer never tells.
func (h *Handler) requestPasswordReset(c *fiber.Ctx) error {
	email := web.Posted(c, "email")
	err := h.Auth.RequestReset(c.UserContext(), email, h.ClientIP(c))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.TooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	return h.Render(c, customer.ForgotPassword(h.Viewer(c, ""), email, true))
}

func (h *Handler) showResetPassword(c *fiber.Ctx) error {
	token := c.Query("token")
	err := h.Auth.CheckResetToken(c.UserContext(), token)
	if err != nil && !errors.Is(err, auth.ErrBadToken) {
		return err
	}
	return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), token, "", err != nil))
}

// resetPassword sets the new password and signs the user out everywhere.
func (h *Handler) resetPassword(c *fiber.Ctx) error {
	token := web.Posted(c, "token")
	u, errs, err := h.Auth.ResetPassword(c.UserContext(), token, web.Posted(c, "password"))
	if errors.Is(err, auth.ErrBadToken) {
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), "", "", true))
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), token, errs["password"], false))
	}
	h.ClearCookie(c, web.SessionCookie)
	// The link proved the mailbox: this browser may sign in even while strangers are guessing at the
	// address (the way back the sign-in page's throttle message points to).
	if err := h.RememberDevice(c, u.ID, false); err != nil {
		return err
	}
	return web.Redirect(c, "/signin?notice=password-reset")
}
