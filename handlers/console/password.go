package console

import (
	"videogen/handlers/web"

	"errors"
	"net/url"

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
	err := h.Auth.RequestReset(c.UserContext(), email, h.Client(c))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.TooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	return h.Render(c, customer.ForgotPassword(h.Viewer(c, ""), email, true))
}

// showResetPassword answers GET /password/reset?token=…, the page a reset link (e-mailed, or printed by
// `videogen accounts create` for a first password) opens. It names the account whose password the link
// sets. Opened while another user is signed in in this browser, it says so and offers to sign that user
// out first: the form is shown only once nobody else is signed in here, so choosing the password never
// touches another person's session.
func (h *Handler) showResetPassword(c *fiber.Ctx) error {
	p, err := h.resetPage(c, c.Query("token"))
	if err != nil {
		return err
	}
	return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), *p))
}

// resetPage is the set-password page of a link: whose password, first or new, and who else is signed in.
func (h *Handler) resetPage(c *fiber.Ctx, token string) (*customer.ResetPage, error) {
	u, err := h.Auth.ResetUser(c.UserContext(), token)
	if errors.Is(err, auth.ErrBadToken) {
		return &customer.ResetPage{BadLink: true}, nil
	}
	if err != nil {
		return nil, err
	}
	p := &customer.ResetPage{Token: token, Email: u.Email, First: u.PasswordHash == ""}
	if other := web.CurrentUser(c); other != nil && other.ID != u.ID {
		p.SignedInAs = other.Email
	}
	return p, nil
}

// signOutForReset answers POST /password/reset/signout, the set-password page's "Sign out and continue":
// it ends this browser's session (another user's) and opens the link's page again, now with its form.
func (h *Handler) signOutForReset(c *fiber.Ctx) error {
	if tok, ok := c.Locals(web.LocalSessionToken).(string); ok {
		if err := h.Auth.EndSession(c.UserContext(), tok); err != nil {
			return err
		}
	}
	h.ClearCookie(c, web.SessionCookie)
	return web.Redirect(c, "/password/reset?token="+url.QueryEscape(web.Posted(c, "token")))
}

// resetPassword sets the password a link names and signs its user out everywhere. While another user is
// signed in in this browser (they signed in again in another tab, say) it does nothing and shows the
// page that says so (409): it never sets one person's password from another's session, nor ends it.
func (h *Handler) resetPassword(c *fiber.Ctx) error {
	token := web.Posted(c, "token")
	p, err := h.resetPage(c, token)
	if err != nil {
		return err
	}
	if p.BadLink {
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), *p))
	}
	if p.SignedInAs != "" {
		c.Status(fiber.StatusConflict)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), *p))
	}
	u, errs, err := h.Auth.ResetPassword(c.UserContext(), token, web.Posted(c, "password"))
	if errors.Is(err, auth.ErrBadToken) {
		c.Status(fiber.StatusBadRequest)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), customer.ResetPage{BadLink: true}))
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		p.Error = errs["password"]
		c.Status(fiber.StatusUnprocessableEntity)
		return h.Render(c, customer.ResetPassword(h.Viewer(c, ""), *p))
	}
	// The link's user may be the one signed in here: every session of theirs has just ended.
	h.ClearCookie(c, web.SessionCookie)
	// The link proved the mailbox: this browser may sign in even while strangers are guessing at the
	// address (the way back the sign-in page's throttle message points to).
	if err := h.RememberDevice(c, u.ID, false); err != nil {
		return err
	}
	notice := "password-reset"
	if p.First {
		notice = "password-set"
	}
	return web.Redirect(c, "/signin?notice="+notice)
}
