package support

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/console"
	"videogen/handlers/twostep"
	twostepviews "videogen/views/twostep"
)

// handler is the staff pages; a tenant's pages are the console's own (console.Handler), scoped to the
// account in the path.
type handler struct {
	*console.Handler
}

// Routes registers the staff pages (docs/support.md): roles support and admin only; everyone else gets
// the 404 of an unknown path. The second factor comes first: its own pages are the only ones a staff
// member reaches without having passed it in this session.
func Routes(app *fiber.App, c *console.Handler) {
	h := &handler{Handler: c}
	steps := &twostep.Pages{Base: c.Base, Where: twostepviews.Staff, Home: "/support"}
	steps.Register(app.Group("/support/2fa", h.hideFromNonStaff, h.Page, h.requireStaff))

	support := app.Group("/support", h.hideFromNonStaff, h.Page, h.requireStaff, h.requireSecondFactor)
	support.Get("", h.showOverview)
	support.Get("/search", h.searchStaff)
	support.Get("/calls/:request", h.showStaffCall)
	support.Get("/tasks/:id", h.showStaffTask)
	// One tenant's pages are the customer's own pages (the same handlers and queries), scoped to the
	// account in the path instead of the signed-in user's.
	tenant := support.Group("/accounts/:account", h.staffTenant)
	tenant.Get("", h.showStaffAccount)
	tenant.Get("/tasks", h.ShowTasks)
	tenant.Get("/tasks/:id", h.ShowTask)
	tenant.Get("/calls", h.ShowCalls)
	tenant.Get("/calls.csv", h.ExportCalls)
	tenant.Get("/calls/:request", h.ShowCall)
	tenant.Get("/ledger", h.showStaffLedger)
	tenant.Get("/webhooks", h.ShowWebhooks)
	tenant.Get("/webhooks/:id", h.ShowWebhook)
	// What admins may change; every form is confirmed before money moves or access changes.
	tenant.Post("/balance", h.requireAdmin, h.adjustBalance)
	tenant.Post("/disable", h.requireAdmin, h.disableAccount)
	tenant.Post("/enable", h.requireAdmin, h.enableAccount)
	support.Post("/users/:user/role", h.requireAdmin, h.setRole)
	support.Get("/prices", h.requireAdmin, h.showPrices)
	support.Post("/prices", h.requireAdmin, h.setPrices)
	support.Get("/audit", h.requireAdmin, h.showAuditLog)
}
