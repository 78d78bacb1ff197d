package handlers

import (
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/audit"
	"videogen/internal/auth"
	"videogen/models"
	"videogen/views"
)

// notFound answers exactly what an unknown path answers, so /support tells a visitor nothing: the page
// is rendered as for a signed-out visitor, since an unknown path never reads the session.
func (h *handler) notFound(c *fiber.Ctx) error {
	c.Locals(localUser, nil)
	c.Locals(localSession, nil)
	return fiber.ErrNotFound
}

// hideFromNonStaff runs before anything else on /support: for anyone but staff the answer is made by the
// same error handler as an unknown path's, before the page middleware sets a cookie or a cache header or
// checks a form's CSRF token, so nothing tells the two apart.
func (h *handler) hideFromNonStaff(c *fiber.Ctx) error {
	tok := c.Cookies(sessionCookie)
	u, sess, err := h.Auth.Session(c.UserContext(), tok)
	if err != nil && !errors.Is(err, auth.ErrNoSession) {
		return err
	}
	if u == nil || !u.Staff() {
		return fiber.ErrNotFound
	}
	// The page middleware takes the session from here rather than reading it again.
	c.Locals(localUser, u)
	c.Locals(localSession, sess)
	c.Locals(localSessionToken, strings.Clone(tok))
	return c.Next()
}

// requireStaff lets support and admin through; anyone else gets the 404 of an unknown path.
func (h *handler) requireStaff(c *fiber.Ctx) error {
	if u := currentUser(c); u == nil || !u.Staff() {
		return h.notFound(c)
	}
	return c.Next()
}

// requireAdmin lets admins through; support staff get the 404 page too (they see no admin form).
func (h *handler) requireAdmin(c *fiber.Ctx) error {
	if u := currentUser(c); u == nil || u.Role != models.RoleAdmin {
		return h.notFound(c)
	}
	return c.Next()
}

// requireSecondFactor sends a staff member who has no second factor yet to enrolment, and one whose
// session has not passed it to the code page; nothing of another tenant is shown before.
func (h *handler) requireSecondFactor(c *fiber.Ctx) error {
	u, sess := currentUser(c), currentSession(c)
	next := url.QueryEscape(c.OriginalURL())
	if u.TOTPEnabledAt == nil {
		return redirect(c, "/support/2fa/setup?next="+next)
	}
	if sess == nil || sess.SecondFactorAt == nil {
		return redirect(c, "/support/2fa?next="+next)
	}
	return c.Next()
}

// tenant is whose data a console page shows and where its links go: the signed-in customer's own
// account under /console, or, for staff, the account in the path under /support/accounts/{id}. The
// customer's handlers and queries serve both (docs/support.md, "One query layer, two audiences").
type tenant struct {
	AccountID int64
	Base      string // "/console" or "/support/accounts/{id}"
	Staff     *views.StaffContext
}

const localTenant = "tenant"

// tenantOf is the page's tenant: the one staffTenant set, else the signed-in user's own account.
func tenantOf(c *fiber.Ctx) tenant {
	if t, ok := c.Locals(localTenant).(tenant); ok {
		return t
	}
	return tenant{AccountID: currentUser(c).AccountID, Base: "/console"}
}

// staffTenant scopes the pages under /support/accounts/{account} to that account (404 when there is
// none) and records that a staff member opened it.
func (h *handler) staffTenant(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("account"), 10, 64)
	if err != nil || id <= 0 {
		return fiber.ErrNotFound
	}
	acct, owner, err := models.AccountWithOwner(c.UserContext(), h.DB.R, id)
	if errors.Is(err, models.ErrNotFound) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	base := "/support/accounts/" + strconv.FormatInt(id, 10)
	c.Locals(localTenant, tenant{AccountID: id, Base: base, Staff: &views.StaffContext{
		Account: *acct, OwnerEmail: owner, Base: base, Admin: currentUser(c).Role == models.RoleAdmin}})
	return c.Next()
}

// staffActor is the signed-in staff member as the audit log names them.
func (h *handler) staffActor(c *fiber.Ctx) audit.Actor {
	return audit.StaffActor(currentUser(c), h.clientIP(c))
}

// auditLook records that a staff member opened something of a tenant's. A look that cannot be recorded
// is not shown: the log must be complete.
func (h *handler) auditLook(c *fiber.Ctx, e audit.Entry) error {
	return audit.Record(c.UserContext(), h.DB.W, h.Now(), h.staffActor(c), e)
}

// auditTenantLook records a look at one of the tenant's pages, when staff are the ones looking.
func (h *handler) auditTenantLook(c *fiber.Ctx, action, targetType, targetID string) error {
	t := tenantOf(c)
	if t.Staff == nil {
		return nil
	}
	if targetID == "" {
		targetType, targetID = audit.TargetAccount, audit.AccountRef(t.AccountID)
	}
	detail := ""
	if q := c.Context().QueryArgs().String(); q != "" {
		detail = "?" + strings.Clone(q)
	}
	return h.auditLook(c, audit.Entry{Action: action, TargetType: targetType, TargetID: targetID, AccountID: t.AccountID, Detail: detail})
}

// tenantViewer is the viewer of a tenant's page: staff see it with the staff banner and links.
func (h *handler) tenantViewer(c *fiber.Ctx, active string) views.Viewer {
	v := h.viewer(c, active)
	v.Staff = tenantOf(c).Staff
	return v
}
