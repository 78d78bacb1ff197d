package console

import (
	"sync"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/twostep"
	"videogen/handlers/web"
	"videogen/internal/domain/members"
	twostepviews "videogen/views/twostep"
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
	app.Post("/password/reset/signout", h.Page, h.signOutForReset)
	app.Get("/invite", h.Page, h.showInvite)
	app.Post("/invite", h.Page, h.acceptInvite)

	// The console. Every member reads every page but the few Require names; what changes anything
	// requires the action it is (internal/domain/members.Can, docs/members.md), a form about the member
	// themselves (password, display time zone, leaving) nothing more.
	// The second sign-in step (docs/console.md, "Two-step sign-in"): its pages come before the console's,
	// which a member whose session has not passed it (or who must set it up) does not reach.
	steps := &twostep.Pages{Base: b, Where: twostepviews.Console, Home: "/console",
		Required: func(c *fiber.Ctx) bool { return web.CurrentUser(c).AccountRequiresSecondFactor }}
	steps.Register(app.Group("/console/2fa", h.Page, h.RequireUser))
	console := app.Group("/console", h.Page, h.RequireUser, h.requireSecondStep)
	console.Get("", h.showDashboard)
	console.Get("/keys", h.Require(members.SeeKeys), h.showKeys)
	console.Post("/keys", h.Require(members.ManageKeys), h.createKey)
	console.Get("/keys/:id/limits", h.Require(members.ManageKeys), h.showKeyLimits)
	console.Post("/keys/:id/limits", h.Require(members.ManageKeys), h.saveKeyLimits)
	console.Get("/keys/:id/revoke", h.Require(members.ManageKeys), h.confirmRevokeKey)
	console.Post("/keys/:id/revoke", h.Require(members.ManageKeys), h.revokeKey)
	console.Get("/videos/new", h.showNewVideo)
	console.Post("/videos/new", h.Require(members.CreateVideos), h.createVideo)
	console.Get("/tasks", h.ShowTasks)
	console.Get("/tasks/:id", h.ShowTask)
	console.Get("/tasks/:id/status", h.showTaskStatus)
	console.Get("/tasks/:id/video", h.streamTaskVideo)
	console.Post("/tasks/:id/cancel", h.Require(members.CancelTasks), h.cancelTask)
	console.Get("/calls", h.ShowCalls)
	console.Get("/calls.csv", h.ExportCalls)
	console.Get("/calls/:request", h.ShowCall)
	console.Get("/wallet", h.showWallet)
	// Forms post to their page's own URL, so a refused one is shown again (422) at the address it came from.
	console.Post("/wallet", h.RequireForm(map[string]members.Action{"alerts": members.BillingSettings, "billing": members.BillingSettings, "test": members.AddFunds}, members.AddFunds), h.walletForm)
	console.Get("/wallet/topups/:id", h.Require(members.SeePayments), h.showTopup)
	console.Get("/wallet/topups/:id/canceled", h.Require(members.AddFunds), h.showTopupCanceled)
	console.Get("/webhooks", h.ShowWebhooks)
	console.Post("/webhooks", h.Require(members.ManageWebhooks), h.addWebhook)
	console.Get("/webhooks/:id", h.ShowWebhook)
	console.Get("/webhooks/:id/delete", h.Require(members.ManageWebhooks), h.confirmDeleteWebhook)
	console.Post("/webhooks/:id/deliveries/:delivery/resend", h.Require(members.ManageWebhooks), h.resendWebhook)
	console.Post("/webhooks/:id/:action", h.Require(members.ManageWebhooks), h.webhookAction)
	console.Get("/usage", h.showUsage)
	console.Get("/usage.csv", h.exportUsage)
	console.Get("/statements", h.Require(members.SeeStatements), h.showStatements)
	console.Get("/statements/:month", h.Require(members.SeeStatements), h.showStatement)
	console.Get("/account", h.showAccount)
	// The account page mixes the member's own settings with the account's: each form is held to its own rule.
	console.Post("/account", h.RequireForm(map[string]members.Action{"timezone": members.Personal, "password": members.Personal, "name": members.RenameAccount, "two-step": members.RequireTwoStep}, members.BillingSettings), h.updateAccount)
	console.Get("/members", h.showMembers)
	console.Post("/members", h.Require(members.ManageMembers), h.inviteMember)
	console.Get("/members/leave", h.confirmLeave)
	console.Post("/members/leave", h.leaveAccount)
	console.Post("/members/invitations/:id/withdraw", h.Require(members.ManageMembers), h.withdrawInvitation)
	console.Post("/members/:id/role", h.Require(members.ManageMembers), h.changeMemberRole)
	console.Get("/members/:id/remove", h.Require(members.ManageMembers), h.confirmRemoveMember)
	console.Post("/members/:id/remove", h.Require(members.ManageMembers), h.removeMember)
	return h
}
