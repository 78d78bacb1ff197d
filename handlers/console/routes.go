package console

import (
	"sync"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
)

// Handler is the console's pages, and the public ones. The staff pages of a tenant are these same
// pages, scoped to the account in their path (web.Tenant): support embeds Handler to serve them.
type Handler struct {
	*web.Base

	exportsMu sync.Mutex
	exports   map[int64]int // running call-log exports per account
}

// Routes registers the public pages, signing in and out, and the console, and returns the console's
// handlers for the staff pages to share.
func Routes(app *fiber.App, b *web.Base) *Handler {
	h := &Handler{Base: b}
	// Public pages and signing in.
	app.Get("/", h.Page, h.showLanding)
	app.Get("/pricing", h.Page, h.showPricing)
	app.Get("/docs/api", h.Page, h.showAPIDocs)
	app.Get("/terms", h.Page, h.showTerms)
	app.Get("/privacy", h.Page, h.showPrivacy)
	app.Get("/signup", h.Page, h.showSignUp)
	app.Post("/signup", h.Page, h.signUp)
	app.Get("/signin", h.Page, h.showSignIn)
	app.Post("/signin", h.Page, h.signIn)
	app.Post("/signout", h.Page, h.signOut)
	app.Get("/verify", h.Page, h.showVerifyEmail)
	app.Post("/verify", h.Page, h.verifyEmail)
	app.Post("/verify/resend", h.Page, h.RequireUser, h.resendVerification)
	app.Get("/password/forgot", h.Page, h.showForgotPassword)
	app.Post("/password/forgot", h.Page, h.requestPasswordReset)
	app.Get("/password/reset", h.Page, h.showResetPassword)
	app.Post("/password/reset", h.Page, h.resetPassword)

	// The console.
	console := app.Group("/console", h.Page, h.RequireUser)
	console.Get("", h.showDashboard)
	console.Get("/keys", h.showKeys)
	console.Post("/keys", h.createKey)
	console.Get("/keys/:id/limits", h.showKeyLimits)
	console.Post("/keys/:id/limits", h.saveKeyLimits)
	console.Get("/keys/:id/revoke", h.confirmRevokeKey)
	console.Post("/keys/:id/revoke", h.revokeKey)
	console.Get("/tasks", h.ShowTasks)
	console.Get("/tasks/:id", h.ShowTask)
	console.Get("/tasks/:id/video", h.streamTaskVideo)
	console.Post("/tasks/:id/cancel", h.cancelTask)
	console.Get("/calls", h.ShowCalls)
	console.Get("/calls.csv", h.ExportCalls)
	console.Get("/wallet", h.showWallet)
	// Forms post to their page's own URL, so a refused one is shown again (422) at the address it came from.
	console.Post("/wallet", h.walletForm)
	console.Get("/wallet/topups/:id", h.showTopup)
	console.Get("/wallet/topups/:id/canceled", h.showTopupCanceled)
	console.Get("/webhooks", h.ShowWebhooks)
	console.Post("/webhooks", h.addWebhook)
	console.Get("/webhooks/:id", h.ShowWebhook)
	console.Get("/webhooks/:id/delete", h.confirmDeleteWebhook)
	console.Post("/webhooks/:id/deliveries/:delivery/resend", h.resendWebhook)
	console.Post("/webhooks/:id/:action", h.webhookAction)
	console.Get("/account", h.showAccount)
	console.Post("/account", h.updateAccount)
	return h
}
