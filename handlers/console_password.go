package handlers

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/auth"
	"videogen/views"
)

func (h *handler) showForgotPassword(c *fiber.Ctx) error {
	return h.render(c, views.ForgotPassword(h.viewer(c, ""), "", false))
}

// requestPasswordReset e-mails a reset link when the address has an account; the answer never tells.
func (h *handler) requestPasswordReset(c *fiber.Ctx) error {
	email := posted(c, "email")
	err := h.Auth.RequestReset(c.UserContext(), email, h.clientIP(c))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.tooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	return h.render(c, views.ForgotPassword(h.viewer(c, ""), email, true))
}

func (h *handler) showResetPassword(c *fiber.Ctx) error {
	token := c.Query("token")
	err := h.Auth.CheckResetToken(c.UserContext(), token)
	if err != nil && !errors.Is(err, auth.ErrBadToken) {
		return err
	}
	return h.render(c, views.ResetPassword(h.viewer(c, ""), token, "", err != nil))
}

// resetPassword sets the new password and signs the user out everywhere.
func (h *handler) resetPassword(c *fiber.Ctx) error {
	token := posted(c, "token")
	u, errs, err := h.Auth.ResetPassword(c.UserContext(), token, posted(c, "password"))
	if errors.Is(err, auth.ErrBadToken) {
		c.Status(fiber.StatusBadRequest)
		return h.render(c, views.ResetPassword(h.viewer(c, ""), "", "", true))
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.render(c, views.ResetPassword(h.viewer(c, ""), token, errs["password"], false))
	}
	h.clearCookie(c, sessionCookie)
	// The link proved the mailbox: this browser may sign in even while strangers are guessing at the
	// address (the way back the sign-in page's throttle message points to).
	if err := h.rememberDevice(c, u.ID, false); err != nil {
		return err
	}
	return redirect(c, "/signin?notice=password-reset")
}
