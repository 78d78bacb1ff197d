package api

import (
	"videogen/handlers/web"

	"context"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/media"
	"videogen/internal/refusal"
)

// importFiles answers POST /uploads/v1/import: it fetches each https:// link through the address guard
// and stores the files like an upload, all or none.
func (h *handler) importFiles(c *fiber.Ctx) error {
	req, aerr := media.ParseImport(c.Request().Body())
	if aerr != nil {
		return aerr
	}
	// A shutdown stops the fetches; the request is then answered 503 rather than cut off.
	ctx, cancel := context.WithCancel(c.UserContext())
	defer context.AfterFunc(h.Stopping, cancel)()
	defer cancel()
	files, fetched, err := h.Media.Import(ctx, web.Principal(c).AccountID, req, h.Importer)
	c.Locals(web.LocalBytesIn, int64(len(c.Request().Body()))+fetched)
	if err != nil && h.Stopping.Err() != nil {
		return refusal.ShuttingDown
	}
	if err != nil {
		return err
	}
	c.Locals(web.LocalFiles, len(files))
	return c.JSON(media.NewAnswer(files, media.ImportFields))
}
