package webhooks

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
)

// handler is the webhooks': events other services send us, each authorized by its signature.
type handler struct {
	*web.Base
}

// Routes registers the webhooks. Outside /v1: no key, no session, no CSRF token.
func Routes(app *fiber.App, b *web.Base) {
	h := &handler{Base: b}
	app.Post(web.StripeWebhookPath, h.stripeWebhook)
}
