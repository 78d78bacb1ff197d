package console

import (
	"videogen/handlers/web"

	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/views/customer"
)

func (h *Handler) showSignIn(c *fiber.Ctx) error {
	if web.CurrentUser(c) != nil {
		return web.Redirect(c, web.SafeNext(c.Query("next")))
	}
	return h.Render(c, customer.SignIn(h.Viewer(c, ""), customer.SignInForm{Next: c.Query("next")}))
}

// signIn checks the password (throttled per client and per address: internal/domain/auth/trust.go) and starts a
// session.
func (h *Handler) signIn(c *fiber.Ctx) error {
	form := customer.SignInForm{Email: web.Posted(c, "email"), Next: web.Posted(c, "next")}
	u, err := h.Auth.SignIn(c.UserContext(), form.Email, web.Posted(c, "password"), h.Client(c))
	var throttled *auth.ThrottledError
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		form.Error = "The e-mail address or the password is not right."
		c.Status(fiber.StatusUnauthorized)
		return h.Render(c, customer.SignIn(h.Viewer(c, ""), form))
	case errors.Is(err, auth.ErrRemoved):
		form.Error = "You were removed from this account, so you cannot sign in. To come back, ask one of its owners or admins to invite you again."
		c.Status(fiber.StatusForbidden)
		return h.Render(c, customer.SignIn(h.Viewer(c, ""), form))
	case errors.Is(err, auth.ErrAccountDisabled):
		form.Error = "This account is disabled, so you cannot sign in. Contact support."
		c.Status(fiber.StatusForbidden)
		return h.Render(c, customer.SignIn(h.Viewer(c, ""), form))
	case errors.As(err, &throttled):
		who := "for this address"
		if throttled.Scope == "network" {
			who = "from your network"
		}
		form.Error = "Too many sign-in attempts " + who + ". For your account's safety, wait " + throttled.Wait() + " and try again, or reset your password."
		c.Status(fiber.StatusTooManyRequests)
		c.Set(fiber.HeaderRetryAfter, web.Itoa(int(throttled.RetryAfter.Seconds())+1))
		return h.Render(c, customer.SignIn(h.Viewer(c, ""), form))
	case err != nil:
		return err
	}
	if err := h.startSession(c, u.ID); err != nil {
		return err
	}
	return web.Redirect(c, web.SafeNext(form.Next))
}

// startSession signs this browser in as the user: a fresh session (a sign-in never reuses one, so any
// it had ends) and its cookie, and the device cookie that lets this browser sign in again while
// strangers are guessing the password.
func (h *Handler) startSession(c *fiber.Ctx, userID int64) error {
	if old := c.Cookies(web.SessionCookie); old != "" {
		_ = h.Auth.EndSession(c.UserContext(), old)
	}
	token, err := h.Auth.StartSession(c.UserContext(), userID, h.ClientIP(c), string(c.Request().Header.UserAgent()))
	if err != nil {
		return err
	}
	h.SetCookie(c, web.SessionCookie, token, auth.SessionTTL)
	return h.RememberDevice(c, userID, false)
}

// signOut ends this browser's session.
func (h *Handler) signOut(c *fiber.Ctx) error {
	if tok, ok := c.Locals(web.LocalSessionToken).(string); ok {
		if err := h.Auth.EndSession(c.UserContext(), tok); err != nil {
			return err
		}
	}
	h.ClearCookie(c, web.SessionCookie)
	return web.Redirect(c, "/signin?notice=signed-out")
}
