// Package handlers is videogen's HTTP layer: it parses requests, authorizes them, calls the domain and
// renders JSON (and, later, console pages). The route table below is the map of the product.
package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	"github.com/gofiber/fiber/v2/middleware/helmet"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"videogen/billing"
	"videogen/billing/payments"
	"videogen/internal/apikeys"
	"videogen/internal/auth"
	"videogen/internal/calllog"
	"videogen/internal/db"
	"videogen/internal/inflight"
	"videogen/internal/media"
	"videogen/internal/metrics"
	"videogen/internal/money"
	"videogen/internal/ratelimit"
	"videogen/internal/videos"
	"videogen/static"
)

// Deps is what the handlers need from the rest of the service.
type Deps struct {
	DB      *db.DB
	Log     *slog.Logger
	Keys    *apikeys.Authenticator
	Limiter ratelimit.Limiter
	CallLog *calllog.Writer
	Videos  *videos.Service
	Prices  *billing.Prices
	// ModelServed reports whether some upstream credential serves a model alias now (nil: all are);
	// GET /v1/models lists only those.
	ModelServed func(alias string) bool
	MediaPolicy videos.MediaPolicy
	Media       *media.Service
	Importer    media.Opener  // fetches import links through the address guard
	PresignTTL  time.Duration // lifetime of the S3 links /media redirects to
	Now         func() time.Time
	// Stopping is done when the server stops waiting for requests to finish: one still reading its body
	// or fetching an import is then answered 503 shutting_down (nil: never).
	Stopping context.Context
	// Transfers bounds the uploads and imports running at once, per account and in all (nil: unbounded).
	Transfers *inflight.Limiter

	// The console's needs.
	Auth           *auth.Service
	Secrets        []string       // APP_SECRET values: the first signs, all verify
	SecureCookies  bool           // PUBLIC_BASE_URL is https
	TrustedProxies []netip.Prefix // whose X-Forwarded-For is believed
	PublicBaseURL  string
	TestTopups     bool
	// TestTopupMin and TestTopupMax bound a test top-up (TEST_TOPUP_MIN, TEST_TOPUP_MAX).
	TestTopupMin, TestTopupMax money.Micros
	Payments                   *payments.Service // Stripe top-ups and balance alerts
	// Metrics counts requests for /metrics (nil: not counted).
	Metrics *metrics.Metrics
}

type handler struct {
	Deps

	arriving sync.Map // *fasthttp.RequestHeader → arrival: API requests whose body is still being read

	exportsMu sync.Mutex
	exports   map[int64]int // running call-log exports per account
}

// securityHeaders apply to every answer: no inline scripts or styles, no framing, no referrer beyond
// this site. Forms post only here — and to Stripe Checkout, because browsers hold the redirect a form
// is answered with to form-action too, and the top-up form is answered with a 303 to Stripe's page.
var securityHeaders = helmet.Config{
	ContentSecurityPolicy: "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; media-src 'self'; " +
		"object-src 'none'; base-uri 'none'; form-action 'self' https://checkout.stripe.com; frame-ancestors 'none'",
	XFrameOptions:      "DENY",
	ReferrerPolicy:     "same-origin",
	ContentTypeNosniff: "nosniff",
	PermissionPolicy:   "camera=(), microphone=(), geolocation=(), payment=()",
}

// MaxJSONBody is the largest JSON request body (enforced by fasthttp while it reads the body).
const MaxJSONBody = 1 << 20

// New builds the Fiber app with every route.
func New(d Deps) *fiber.App {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Stopping == nil {
		d.Stopping = context.Background()
	}
	h := &handler{Deps: d}
	app := fiber.New(fiber.Config{
		AppName: "videogen",
		// Bodies stream: an upload goes to storage as it arrives. Every other route holds its body to
		// MaxJSONBody while reading it (limitBody); BodyLimit is only how much is read before a handler runs.
		BodyLimit:                    MaxJSONBody,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		DisableStartupMessage:        true,
		ReadTimeout:                  60 * time.Second,
		IdleTimeout:                  120 * time.Second,
		ErrorHandler:                 h.lastResortError,
	})
	// Remember where an API request was going as soon as its headers are read: if its body never arrives
	// whole, fasthttp refuses it before any route runs and forgets the path, and the call log must still
	// record it.
	app.Server().HeaderReceived = h.headerReceived
	recoverPanics := recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: h.logPanic})
	app.Use(h.requestID, h.measure, h.accessLog, recoverPanics, helmet.New(securityHeaders), h.strictTransport, h.limitPageBody)
	app.Use("/static", filesystem.New(filesystem.Config{Root: http.FS(static.FS), MaxAge: 3600}))

	app.Get("/healthz", h.healthz)
	app.Get("/readyz", h.readyz)

	// The API: /v1 and the media entry points /uploads/v1 share one chain, in one order. Outermost, what
	// must see every answer: the graceful end of a body left unread, the call log, error bodies, panics.
	// Then what refuses a request before it costs anything: a compressed body, a body over 1 MiB (the
	// upload streams its own), no key, too fast. Routes add what is theirs: JSON only, transfers bounded.
	api := []fiber.Handler{h.closeIfBodyUnread, h.recordCall, h.renderErrors, recoverPanics,
		h.refuseEncodedBody, h.limitBody, h.authenticate, h.limitRate}
	// The API's contract needs no key: registered before the group, its chain (and authenticate) never runs.
	app.Get("/v1/openapi.json", h.serveOpenAPI)
	v1 := app.Group("/v1", api...)
	v1.Get("/models", h.listModels)
	v1.Post("/videos", h.createVideo) // JSON or multipart text fields: it checks the type itself
	v1.Get("/videos", h.listVideos)
	v1.Get("/videos/:id", h.getVideo)
	v1.Delete("/videos/:id", h.deleteVideo)
	v1.Get("/videos/:id/content", h.downloadVideo)
	v1.Post("/videos/:id/remix", h.refuseRemix)

	uploads := app.Group("/uploads/v1", api...)
	uploads.Post("/files", h.limitTransfers, h.uploadFiles)
	uploads.Post("/import", h.limitTransfers, h.requireJSON, h.importFiles)

	// Stripe's events (the signature is the authorization; outside /v1, no session, no CSRF).
	app.Post(stripeWebhookPath, h.stripeWebhook)

	// Signed media links (the signature is the authorization).
	app.Get("/media/:id", h.getMedia)

	// Public pages and signing in.
	app.Get("/", h.web, h.showLanding)
	app.Get("/pricing", h.web, h.showPricing)
	app.Get("/docs/api", h.web, h.showAPIDocs)
	app.Get("/terms", h.web, h.showTerms)
	app.Get("/privacy", h.web, h.showPrivacy)
	app.Get("/signup", h.web, h.showSignUp)
	app.Post("/signup", h.web, h.signUp)
	app.Get("/signin", h.web, h.showSignIn)
	app.Post("/signin", h.web, h.signIn)
	app.Post("/signout", h.web, h.signOut)
	app.Get("/verify", h.web, h.showVerifyEmail)
	app.Post("/verify", h.web, h.verifyEmail)
	app.Post("/verify/resend", h.web, h.requireUser, h.resendVerification)
	app.Get("/password/forgot", h.web, h.showForgotPassword)
	app.Post("/password/forgot", h.web, h.requestPasswordReset)
	app.Get("/password/reset", h.web, h.showResetPassword)
	app.Post("/password/reset", h.web, h.resetPassword)

	// The console.
	console := app.Group("/console", h.web, h.requireUser)
	console.Get("", h.showDashboard)
	console.Get("/keys", h.showKeys)
	console.Post("/keys", h.createKey)
	console.Get("/keys/:id/revoke", h.confirmRevokeKey)
	console.Post("/keys/:id/revoke", h.revokeKey)
	console.Get("/tasks", h.showTasks)
	console.Get("/tasks/:id", h.showTask)
	console.Get("/tasks/:id/video", h.streamTaskVideo)
	console.Get("/calls", h.showCalls)
	console.Get("/calls.csv", h.exportCalls)
	console.Get("/wallet", h.showWallet)
	// Forms post to their page's own URL, so a refused one is shown again (422) at the address it came from.
	console.Post("/wallet", h.walletForm)
	console.Get("/wallet/topups/:id", h.showTopup)
	console.Get("/wallet/topups/:id/canceled", h.showTopupCanceled)
	console.Get("/account", h.showAccount)
	console.Post("/account", h.updateAccount)

	// Staff (docs/support.md): roles support and admin only; everyone else gets the 404 of an unknown
	// path. The second factor comes first: its own pages are the only ones a staff member reaches
	// without having passed it in this session.
	secondFactor := app.Group("/support/2fa", h.hideFromNonStaff, h.web, h.requireStaff)
	secondFactor.Get("", h.showSecondFactor)
	secondFactor.Post("", h.checkSecondFactor)
	secondFactor.Get("/setup", h.showTOTPEnrolment)
	secondFactor.Post("/setup", h.enrolTOTP)
	secondFactor.Post("/recovery-codes", h.newRecoveryCodes)

	support := app.Group("/support", h.hideFromNonStaff, h.web, h.requireStaff, h.requireSecondFactor)
	support.Get("", h.showOverview)
	support.Get("/search", h.searchStaff)
	support.Get("/calls/:request", h.showStaffCall)
	support.Get("/tasks/:id", h.showStaffTask)
	// One tenant's pages are the customer's own pages (the same handlers and queries), scoped to the
	// account in the path instead of the signed-in user's.
	tenant := support.Group("/accounts/:account", h.staffTenant)
	tenant.Get("", h.showStaffAccount)
	tenant.Get("/tasks", h.showTasks)
	tenant.Get("/tasks/:id", h.showTask)
	tenant.Get("/calls", h.showCalls)
	tenant.Get("/calls.csv", h.exportCalls)
	tenant.Get("/ledger", h.showStaffLedger)
	// What admins may change; every form is confirmed before money moves or access changes.
	tenant.Post("/balance", h.requireAdmin, h.adjustBalance)
	tenant.Post("/disable", h.requireAdmin, h.disableAccount)
	tenant.Post("/enable", h.requireAdmin, h.enableAccount)
	support.Post("/users/:user/role", h.requireAdmin, h.setRole)
	support.Get("/prices", h.requireAdmin, h.showPrices)
	support.Post("/prices", h.requireAdmin, h.setPrices)
	support.Get("/audit", h.requireAdmin, h.showAuditLog)
	return app
}
