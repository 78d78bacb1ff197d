package api

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
)

// pollAfterHeader is openai-poll-after-ms as the server writes header names (canonical case), so setting
// it skips the name's normalization.
var pollAfterHeader = []byte("Openai-Poll-After-Ms")

// getVideo answers GET /v1/videos/{id} with the task and how long to wait before the next poll. The
// body comes rendered from the videos service (from memory, for a task polled in the last moment).
func (h *handler) getVideo(c *fiber.Ctx) error {
	id := c.Params("id")
	c.Locals(web.LocalTaskID, id)
	p, err := h.Videos.Poll(c.UserContext(), web.Principal(c).AccountID, id)
	if err != nil {
		return err
	}
	var ms [20]byte
	c.Response().Header.SetCanonical(pollAfterHeader, strconv.AppendInt(ms[:0], p.PollAfter(h.Now()).Milliseconds(), 10))
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Response().SetBodyRaw(p.JSON) // shared with other polls: fasthttp copies it before any change
	return nil
}
