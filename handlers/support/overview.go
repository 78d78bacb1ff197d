package support

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/upstream/status"
	"videogen/internal/staff/ops"
	"videogen/views/staff"
)

// showOverview answers GET /support: the platform at a glance for staff (docs/support.md). The figures
// come from internal/staff/ops, the same reads /metrics exports. Nothing of one tenant is shown, so there is
// no look to audit.
func (h *handler) showOverview(c *fiber.Ctx) error {
	o, err := ops.Read(c.UserContext(), h.DB, h.Now())
	if err != nil {
		return err
	}
	ups, err := status.Read(c.UserContext(), h.DB, h.Now(), status.DefaultFresh)
	if err != nil {
		return err
	}
	return h.Render(c, staff.SupportOverviewPage(h.Viewer(c, "support"), staff.OverviewPage{Overview: o, Upstreams: ups}))
}
