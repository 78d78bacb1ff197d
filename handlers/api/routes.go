package api

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
)

// handler is the API's: /v1, the media entry points /uploads/v1 and the signed media links.
type handler struct {
	*web.Base
}

// Routes registers the API. recoverPanics is the app's panic handler, run again inside the API's chain
// so that a panic is answered in the API's error body and recorded in the call log.
func Routes(app *fiber.App, b *web.Base, recoverPanics fiber.Handler) {
	h := &handler{Base: b}
	// The API: /v1 and the media entry points /uploads/v1 share one chain, in one order. Outermost, what
	// must see every answer: the graceful end of a body left unread, the call log, error bodies, panics.
	// Then what refuses a request before it costs anything: a compressed body, a body over 1 MiB (the
	// upload streams its own), no key, too fast. Routes add what is theirs: JSON only, transfers bounded.
	chain := []fiber.Handler{h.CloseIfBodyUnread, h.RecordCall, h.RenderErrors, recoverPanics,
		h.RefuseEncodedBody, h.LimitBody, h.Authenticate, h.LimitRate}
	// The API's contract needs no key: registered before the group, its chain (and Authenticate) never runs.
	app.Get("/v1/openapi.json", h.serveOpenAPI)
	v1 := app.Group("/v1", chain...)
	v1.Get("/models", h.listModels)
	v1.Post("/videos", h.createVideo) // JSON or multipart text fields: it checks the type itself
	v1.Get("/videos", h.listVideos)
	v1.Get("/videos/:id", h.getVideo)
	v1.Delete("/videos/:id", h.deleteVideo)
	v1.Get("/videos/:id/content", h.downloadVideo)
	v1.Post("/videos/:id/remix", h.RequireJSON, h.remixVideo)
	// OpenAI's webhook-endpoints API, for keys with the webhooks:write scope (docs/webhooks.md, "The API").
	scoped := h.requireWebhookScope
	v1.Get("/webhook_endpoints", scoped, h.listWebhookEndpoints)
	v1.Post("/webhook_endpoints", scoped, h.RequireJSON, h.createWebhookEndpoint)
	v1.Get("/webhook_endpoints/:id", scoped, h.getWebhookEndpoint)
	v1.Post("/webhook_endpoints/:id", scoped, h.RequireJSON, h.updateWebhookEndpoint)
	v1.Delete("/webhook_endpoints/:id", scoped, h.deleteWebhookEndpoint)
	v1.Post("/webhook_endpoints/:id/rotate_secret", scoped, h.RequireJSON, h.rotateWebhookSecret)
	v1.Post("/webhook_endpoints/:id/test", scoped, h.RequireJSON, h.testWebhookEndpoint)

	uploads := app.Group("/uploads/v1", chain...)
	uploads.Post("/files", h.LimitTransfers, h.uploadFiles)
	uploads.Post("/import", h.LimitTransfers, h.RequireJSON, h.importFiles)

	// Signed media links (the signature is the authorization).
	app.Get("/media/:id", h.getMedia)
}
