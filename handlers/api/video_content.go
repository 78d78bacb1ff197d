package api

import (
	"videogen/handlers/web"

	"github.com/gofiber/fiber/v2"
)

// downloadVideo answers GET /v1/videos/{id}/content: the whole MP4, or with ?variant=thumbnail or
// spritesheet the still image stored beside it (docs/api.md#variants), streamed from storage. Range is
// not supported (docs/api.md): every answer is 200 with the full file.
func (h *handler) downloadVideo(c *fiber.Ctx) error {
	id := c.Params("id")
	c.Locals(web.LocalTaskID, id)
	content, err := h.Videos.OpenContent(c.UserContext(), web.Principal(c).AccountID, id, c.Query("variant"))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, content.ContentType)
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+id+content.Ext+`"`)
	c.Set(fiber.HeaderAcceptRanges, "none")
	// fasthttp streams the file in chunks, sets Content-Length from the size and closes it when done.
	c.Response().SetBodyStream(content.Body, int(content.Size))
	return nil
}
