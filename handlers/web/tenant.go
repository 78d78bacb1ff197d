package web

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/audit"
	"videogen/views"
)

// Tenant is whose data a console page shows and where its links go: the signed-in customer's own
// account under /console, or, for staff, the account in the path under /support/accounts/{id}. The
// customer's handlers and queries serve both (docs/support.md, "One query layer, two audiences").
type Tenant struct {
	AccountID int64
	Base      string // "/console" or "/support/accounts/{id}"
	Staff     *views.StaffContext
}

const LocalTenant = "tenant"

// tenantOf is the page's tenant: the one staffTenant set, else the signed-in user's own account.
func TenantOf(c *fiber.Ctx) Tenant {
	if t, ok := c.Locals(LocalTenant).(Tenant); ok {
		return t
	}
	return Tenant{AccountID: CurrentUser(c).AccountID, Base: "/console"}
}

// staffActor is the signed-in staff member as the audit log names them.
func (h *Base) StaffActor(c *fiber.Ctx) audit.Actor {
	return audit.StaffActor(CurrentUser(c), h.ClientIP(c))
}

// auditLook records that a staff member opened something of a tenant's. A look that cannot be recorded
// is not shown: the log must be complete.
func (h *Base) AuditLook(c *fiber.Ctx, e audit.Entry) error {
	return audit.Record(c.UserContext(), h.DB.W, h.Now(), h.StaffActor(c), e)
}

// auditTenantLook records a look at one of the tenant's pages, when staff are the ones looking.
func (h *Base) AuditTenantLook(c *fiber.Ctx, action, targetType, targetID string) error {
	t := TenantOf(c)
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
	return h.AuditLook(c, audit.Entry{Action: action, TargetType: targetType, TargetID: targetID, AccountID: t.AccountID, Detail: detail})
}

// tenantViewer is the viewer of a tenant's page: staff see it with the staff banner and links.
func (h *Base) TenantViewer(c *fiber.Ctx, active string) views.Viewer {
	v := h.Viewer(c, active)
	v.Staff = TenantOf(c).Staff
	return v
}
