package console

import (
	"videogen/handlers/web"

	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/views"
	"videogen/views/customer"
)

// showVerifyEmail answers the link in the verification e-mail with a button that confirms: a GET (or a
// HEAD) never spends the link, so a mail scanner that opens it leaves it working for the person.
func (h *Handler) showVerifyEmail(c *fiber.Ctx) error {
	token := c.Query("token")
	err := h.Auth.CheckVerifyToken(c.UserContext(), token)
	if errors.Is(err, auth.ErrBadToken) {
		if u := web.CurrentUser(c); u != nil && u.Verified() {
			return web.Redirect(c, "/console?notice=already-verified")
		}
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, customer.VerifyResult(h.Viewer(c, ""), false))
	}
	if err != nil {
		return err
	}
	return h.Render(c, customer.VerifyConfirm(h.Viewer(c, ""), token))
}

// verifyEmail spends the verification link and confirms the address; in the browser that signed up, it
// also signs the person in.
func (h *Handler) verifyEmail(c *fiber.Ctx) error {
	u, signedUpHere, err := h.Auth.Verify(c.UserContext(), web.Posted(c, "token"), c.Cookies(web.SignupCookie))
	if errors.Is(err, auth.ErrBadToken) {
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, customer.VerifyResult(h.Viewer(c, ""), false))
	}
	if err != nil {
		return err
	}
	// The browser that signed up with this address now also shows it reads the address's mail: sign the
	// person in, as sign-in does. Any other browser (the link opened on a phone, or someone else's) only
	// learns that the address is confirmed: a link alone never signs anyone in.
	if signedUpHere {
		if err := h.startSession(c, u.ID); err != nil {
			return err
		}
		h.clearSignupCookie(c)
		return web.Redirect(c, "/console?notice=email-confirmed")
	}
	v := h.Viewer(c, "")
	if v.User != nil && v.User.ID == u.ID {
		v.User = u
	}
	return h.Render(c, customer.VerifyResult(v, true))
}

// resendVerification e-mails a new link (throttled per address).
func (h *Handler) resendVerification(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	if u.Verified() {
		return web.Redirect(c, "/console?notice=already-verified")
	}
	err := h.Auth.SendVerification(c.UserContext(), u)
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		c.Status(fiber.StatusTooManyRequests)
		return h.Render(c, views.ErrorPage(h.Viewer(c, "dashboard"), 429, "Please wait a little",
			"We sent several links recently. Check your inbox and spam folder, or try again in "+throttled.Wait()+"."))
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console?notice=verification-sent")
}
