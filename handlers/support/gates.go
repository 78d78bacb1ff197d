package support

import (
	"videogen/handlers/web"

	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/models"
	"videogen/views"
)

// notFound answers exactly what an unknown path answers, so /support tells a visitor nothing: the page
// is rendered as for a signed-out visitor, since an unknown path never reads the session.
func (h *handler) notFound(c *fiber.Ctx) error {
	c.Locals(web.LocalUser, nil)
	c.Locals(web.LocalSession, nil)
	return fiber.ErrNotFound
}

// hideFromNonStaff runs before anything else on /support: for anyone but staff the answer is made by the
// same error handler as an unknown path's, before the page middleware sets a cookie or a cache header or
// checks a form's CSRF token, so nothing tells the two apart.
func (h *handler) hideFromNonStaff(c *fiber.Ctx) error {
	tok := c.Cookies(web.SessionCookie)
	u, sess, err := h.Auth.Session(c.UserContext(), tok)
	if err != nil && !errors.Is(err, auth.ErrNoSession) {
		return err
	}
	if u == nil || !u.Staff() {
		return fiber.ErrNotFound
	}
	// The page middleware takes the session from here rather than reading it again.
	c.Locals(web.LocalUser, u)
	c.Locals(web.LocalSession, sess)
	c.Locals(web.LocalSessionToken, strings.Clone(tok))
	return c.Next()
}

// requireStaff lets support and admin through; anyone else gets the 404 of an unknown path.
func (h *handler) requireStaff(c *fiber.Ctx) error {
	if u := web.CurrentUser(c); u == nil || !u.Staff() {
		return h.notFound(c)
	}
	return c.Next()
}

// requireAdmin lets admins through; support staff get the 404 page too (they see no admin form).
func (h *handler) requireAdmin(c *fiber.Ctx) error {
	if u := web.CurrentUser(c); u == nil || u.Role != models.RoleAdmin {
		return h.notFound(c)
	}
	return c.Next()
}

// requireSecondFactor sends a staff member who has no second factor yet to enrolment, and one whose
// session has not passed it to the code page; nothing of another tenant is shown before.
func (h *handler) requireSecondFactor(c *fiber.Ctx) error {
	u, sess := web.CurrentUser(c), web.CurrentSession(c)
	next := url.QueryEscape(c.OriginalURL())
	if u.TOTPEnabledAt == nil {
		return web.Redirect(c, "/support/2fa/setup?next="+next)
	}
	if sess == nil || sess.SecondFactorAt == nil {
		return web.Redirect(c, "/support/2fa?next="+next)
	}
	return c.Next()
}

// staffTenant scopes the pages under /support/accounts/{account} to that account (404 when there is
// none) and records that a staff member opened it.
func (h *handler) staffTenant(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("account"), 10, 64)
	if err != nil || id <= 0 {
		return fiber.ErrNotFound
	}
	if err := h.enterTenant(c, id); err != nil {
		return err
	}
	return c.Next()
}

// enterTenant makes the request one of account id's pages as staff see them: the console's handlers then
// read that account, and their links stay under /support/accounts/{id}.
func (h *handler) enterTenant(c *fiber.Ctx, id int64) error {
	acct, owner, err := models.AccountWithOwner(c.UserContext(), h.DB.R, id)
	if errors.Is(err, models.ErrNotFound) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	base := "/support/accounts/" + strconv.FormatInt(id, 10)
	c.Locals(web.LocalTenant, web.Tenant{AccountID: id, Base: base, Staff: &views.StaffContext{
		Account: *acct, OwnerEmail: owner, Base: base, Admin: web.CurrentUser(c).Role == models.RoleAdmin}})
	return nil
}
