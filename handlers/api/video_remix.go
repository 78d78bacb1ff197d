package api

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/videos"
)

// remixVideo answers POST /v1/videos/{id}/remix: a new video from a completed one of the account, with
// a new prompt (JSON {"prompt"}), priced, reserved and answered as a create.
func (h *handler) remixVideo(c *fiber.Ctx) error {
	p := web.Principal(c)
	out, err := h.Videos.Remix(c.UserContext(), videos.Caller{AccountID: p.AccountID, KeyID: p.KeyID, Call: h.CallRecord(c)}, c.Params("id"),
		c.Request().Body(), c.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	return h.renderCreated(c, out)
}
