package console

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/usage"
	"videogen/views/customer"
)

// showStatements answers GET /console/statements: the months with a statement, newest first, in the
// account's time zone.
func (h *Handler) showStatements(c *fiber.Ctx) error {
	ctx := c.UserContext()
	acct, err := accounts.Get(ctx, h.DB, web.CurrentUser(c).AccountID)
	if err != nil {
		return err
	}
	months, err := usage.Months(ctx, h.DB, acct.ID, accounts.LoadZone(acct.TimeZone), h.Now())
	if err != nil {
		return err
	}
	return h.Render(c, customer.StatementsList(h.Viewer(c, "statements"), months, zoneName(acct.TimeZone)))
}
