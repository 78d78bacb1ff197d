// Package handlers is videogen's HTTP layer, by audience: handlers/api (the JSON API, uploads, media
// links), handlers/console (the public pages and the customer's console), handlers/support (the staff
// pages), handlers/webhooks (Stripe's events); handlers/web holds what they share — every middleware and
// responder. Each audience has its own route table; New assembles them in one app.
package handlers

import (
	"net/http"
	"net/netip"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	"github.com/gofiber/fiber/v2/middleware/helmet"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"videogen/handlers/api"
	"videogen/handlers/console"
	"videogen/handlers/support"
	"videogen/handlers/web"
	"videogen/handlers/webhooks"
	"videogen/static"
)

// Deps is what the HTTP layer needs from the rest of the service (web.Deps).
type Deps = web.Deps

// ParseTrustedProxies reads TRUSTED_PROXIES (web.ParseTrustedProxies).
func ParseTrustedProxies(s string) ([]netip.Prefix, error) { return web.ParseTrustedProxies(s) }

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

// New builds the Fiber app with every route: the shared middleware (web), then each audience's routes.
func New(d Deps) *fiber.App {
	b := web.NewBase(d)
	app := fiber.New(fiber.Config{
		AppName: "videogen",
		// Bodies stream: an upload goes to storage as it arrives. Every other route holds its body to
		// MaxJSONBody while reading it (LimitBody); BodyLimit is only how much is read before a handler runs.
		BodyLimit:                    web.MaxJSONBody,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		DisableStartupMessage:        true,
		ReadTimeout:                  60 * time.Second,
		IdleTimeout:                  120 * time.Second,
		ErrorHandler:                 b.LastResortError,
	})
	// Remember where an API request was going as soon as its headers are read: if its body never arrives
	// whole, fasthttp refuses it before any route runs and forgets the path, and the call log must still
	// record it.
	app.Server().HeaderReceived = b.HeaderReceived
	recoverPanics := recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: b.LogPanic})
	app.Use(b.CloseWhileDraining, b.TagRequest, b.Measure, b.AccessLog, recoverPanics, web.SecurityHeaders(securityHeaders), b.StrictTransport, b.LimitPageBody)
	app.Use("/static", filesystem.New(filesystem.Config{Root: http.FS(static.FS), MaxAge: 3600}))

	app.Get("/healthz", b.Healthz)
	app.Get("/readyz", b.Readyz)
	api.Routes(app, b, recoverPanics)
	webhooks.Routes(app, b)
	support.Routes(app, console.Routes(app, b))
	return app
}
