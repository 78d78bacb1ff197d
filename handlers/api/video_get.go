package api

import (
	"videogen/handlers/web"

	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/videos"
)

// getVideo answers GET /v1/videos/{id} with the task and how long to wait before the next poll.
func (h *handler) getVideo(c *fiber.Ctx) error {
	id := c.Params("id")
	c.Locals(web.LocalTaskID, id)
	t, err := h.Videos.Poll(c.UserContext(), web.Principal(c).AccountID, id)
	if err != nil {
		return err
	}
	c.Set("openai-poll-after-ms", strconv.FormatInt(videos.PollAfter(t, h.Now()).Milliseconds(), 10))
	return c.JSON(videos.ToVideo(t))
}
