package handlers

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/apispec"
	"videogen/views"
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

// showAPIDocs answers GET /docs/api: the same document rendered for people, server-side, no CDN.
func (h *handler) showAPIDocs(c *fiber.Ctx) error {
	var p views.APIDocsPage
	var err error
	if p.Info, err = apispec.DocumentInfo(); err != nil {
		return err
	}
	if p.Operations, err = apispec.Operations(); err != nil {
		return err
	}
	if p.Components, err = apispec.Components(); err != nil {
		return err
	}
	if p.Codes, err = apispec.ErrorCodes(); err != nil {
		return err
	}
	return h.render(c, views.APIDocs(h.viewer(c, "docs"), p))
}
