package api

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/apispec"
)

// serveOpenAPI answers GET /v1/openapi.json: the API's OpenAPI 3.1 document, with this deployment's
// base URL as its server. It needs no key: a developer generates a client before having one.
func (h *handler) serveOpenAPI(c *fiber.Ctx) error {
	doc, err := apispec.JSONFor(h.PublicBaseURL)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(doc)
}
