package console

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/apispec"
	"videogen/views/customer"
)

// showAPIDocs answers GET /docs/api: the same document rendered for people, server-side, no CDN.
func (h *Handler) showAPIDocs(c *fiber.Ctx) error {
	var p customer.APIDocsPage
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
	return h.Render(c, customer.APIDocs(h.Viewer(c, "docs"), p))
}
