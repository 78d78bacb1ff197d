package handlers

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/videos"
)

// createVideo answers POST /v1/videos: validate, reserve, queue; never waits for the upstream.
func (h *handler) createVideo(c *fiber.Ctx) error {
	req, aerr := videos.ParseCreate(c.Request().Body(), h.MediaPolicy)
	if aerr != nil {
		return aerr
	}
	p := principal(c)
	out, err := h.Videos.Create(c.UserContext(), videos.Caller{AccountID: p.AccountID, KeyID: p.KeyID}, req, c.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	c.Locals(localTaskID, out.Task.ID)
	if out.Replayed {
		c.Set("Idempotent-Replayed", "true")
	} else {
		c.Locals(localAmount, out.Task.AmountMicros)
	}
	return c.JSON(videos.ToVideo(out.Task))
}
