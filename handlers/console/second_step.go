package console

import (
	"net/url"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
)

// requireSecondStep keeps the console from a session that owes the second sign-in step: a member who
// turned it on signs in with their password and is then asked for a code (/console/2fa) before any
// page; a member of an account that requires it, without it yet, is sent to set it up. Both come back
// to the page they asked for.
func (h *Handler) requireSecondStep(c *fiber.Ctx) error {
	u, sess := web.CurrentUser(c), web.CurrentSession(c)
	next := url.QueryEscape(c.OriginalURL())
	switch {
	case u.TOTPEnabledAt != nil && (sess == nil || sess.SecondFactorAt == nil):
		return web.Redirect(c, "/console/2fa?next="+next)
	case u.TOTPEnabledAt == nil && u.AccountRequiresSecondFactor:
		return web.Redirect(c, "/console/2fa/setup?next="+next)
	}
	return c.Next()
}
