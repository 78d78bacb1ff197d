package console

import (
	"videogen/handlers/web"

	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
	"videogen/views"
)

// taskStatus is what the console's live pages read of a task while it runs (static/tasks.js): enough to
// update the status, the progress and the money shown, and to know when to fetch the finished page.
type taskStatus struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress int    `json:"progress"`
	// Done is true once the status is completed or failed: the script stops polling and fetches the page.
	Done         bool   `json:"done"`
	BillingState string `json:"billing_state"`
	Amount       string `json:"amount"` // as the pages show it: "$1.20"
}

// showTaskStatus answers GET /console/tasks/{id}/status for the signed-in user's account: the task as
// JSON, with the openai-poll-after-ms header GET /v1/videos/{id} sends, so the page backs off as an API
// client does. Another account's task, or an unknown id, is a 404 with the API's not_found body.
func (h *Handler) showTaskStatus(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	c.Set(fiber.HeaderCacheControl, "no-store")
	t, err := h.Videos.GetWithDeleted(c.UserContext(), u.AccountID, c.Params("id"))
	if errors.Is(err, refusal.NotFound) {
		return h.APIError(c, refusal.NotFound)
	}
	if err != nil {
		return err
	}
	c.Set("openai-poll-after-ms", strconv.FormatInt(videos.PollAfter(t, h.Now()).Milliseconds(), 10))
	return c.JSON(taskStatus{ID: t.ID, Status: views.TaskState(t), Progress: t.Progress, Done: tasks.Terminal(t.Status),
		BillingState: t.BillingState, Amount: views.Money(t.AmountMicros)})
}
