package api

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/refusal"
)

// errRemix answers every remix: OpenAI's SDKs offer it, and a bare 404 would read as a wrong id.
var errRemix = refusal.New("remix_not_supported",
	"Remix is not offered in this version of the API. Create a new video with POST /v1/videos, describing the change in its prompt.")

// refuseRemix answers POST /v1/videos/{id}/remix (out of this version) after the key is checked, like
// every /v1 route, whatever the id.
func (h *handler) refuseRemix(c *fiber.Ctx) error {
	return errRemix
}
