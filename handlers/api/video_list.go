package api

import (
	"videogen/handlers/web"

	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
)

type videoList struct {
	Object  string         `json:"object"`
	Data    []videos.Video `json:"data"`
	FirstID *string        `json:"first_id"`
	LastID  *string        `json:"last_id"`
	HasMore bool           `json:"has_more"`
}

// listVideos answers GET /v1/videos?limit=&after=&order=: the account's tasks, newest first by default.
func (h *handler) listVideos(c *fiber.Ctx) error {
	p := videos.ListParams{Limit: 20, After: c.Query("after")}
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return refusal.Field("invalid_request", "limit", "limit must be a whole number from 1 to 100.")
		}
		p.Limit = n
	}
	switch c.Query("order", "desc") {
	case "desc":
	case "asc":
		p.Asc = true
	default:
		return refusal.Field("invalid_request", "order", "order must be asc or desc.")
	}
	page, err := h.Videos.List(c.UserContext(), web.Principal(c).AccountID, p)
	if err != nil {
		return err
	}
	out := videoList{Object: "list", Data: make([]videos.Video, 0, len(page.Tasks)), HasMore: page.HasMore}
	for i := range page.Tasks {
		out.Data = append(out.Data, videos.ToVideo(&page.Tasks[i]))
	}
	if n := len(page.Tasks); n > 0 {
		out.FirstID, out.LastID = &page.Tasks[0].ID, &page.Tasks[n-1].ID
	}
	return c.JSON(out)
}
