// Package handlers is videogen's HTTP layer: it parses requests, authorizes them, calls the domain and
// renders JSON (and, later, console pages). The route table below is the map of the product.
package handlers

import (
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"videogen/billing"
	"videogen/internal/apikeys"
	"videogen/internal/calllog"
	"videogen/internal/db"
	"videogen/internal/ratelimit"
	"videogen/internal/videos"
)

// Deps is what the handlers need from the rest of the service.
type Deps struct {
	DB          *db.DB
	Log         *slog.Logger
	Keys        *apikeys.Authenticator
	Limiter     ratelimit.Limiter
	CallLog     *calllog.Writer
	Videos      *videos.Service
	Prices      *billing.Prices
	MediaPolicy videos.MediaPolicy
	Now         func() time.Time
}

type handler struct {
	Deps
}

// MaxJSONBody is the largest JSON request body (enforced by fasthttp while it reads the body).
const MaxJSONBody = 1 << 20

// New builds the Fiber app with every route.
func New(d Deps) *fiber.App {
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: d}
	app := fiber.New(fiber.Config{
		AppName:               "videogen",
		BodyLimit:             MaxJSONBody,
		DisableStartupMessage: true,
		ReadTimeout:           60 * time.Second,
		IdleTimeout:           120 * time.Second,
		ErrorHandler:          h.lastResortError,
	})
	app.Use(h.requestID, recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: h.logPanic}))

	app.Get("/healthz", h.healthz)
	app.Get("/readyz", h.readyz)

	v1 := app.Group("/v1", h.recordCall, h.renderErrors, recover.New(recover.Config{EnableStackTrace: true, StackTraceHandler: h.logPanic}), h.authenticate, h.limitRate)
	v1.Get("/models", h.listModels)
	v1.Post("/videos", h.createVideo)
	v1.Get("/videos", h.listVideos)
	v1.Get("/videos/:id", h.getVideo)
	v1.Get("/videos/:id/content", h.downloadVideo)
	return app
}
