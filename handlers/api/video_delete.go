package api

import (
	"videogen/handlers/web"

	"github.com/gofiber/fiber/v2"
)

// videoDeleted is OpenAI's answer to DELETE /v1/videos/{id}.
type videoDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// deleteVideo answers DELETE /v1/videos/{id}: a task that has not finished is cancelled (failed with
// code cancelled, its reservation released) where that can be done safely, else 409 video_not_finished;
// a finished task is hidden from the API and its stored video deleted — the ledger, the task log and the
// call log keep it, and the console shows it deleted. Both answer OpenAI's video.deleted.
func (h *handler) deleteVideo(c *fiber.Ctx) error {
	id := c.Params("id")
	c.Locals(web.LocalTaskID, id)
	p := web.Principal(c)
	if _, err := h.Videos.Delete(c.UserContext(), p.AccountID, id, "API key "+p.KeyPrefix); err != nil {
		return err
	}
	return c.JSON(videoDeleted{ID: id, Object: "video.deleted", Deleted: true})
}
