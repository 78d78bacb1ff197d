package console

import (
	"videogen/handlers/web"

	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/billing"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/videos"
	"videogen/models"
	"videogen/views/customer"
)

// showDashboard answers GET /console: balances, 30 days of spending, recent videos and the next step.
func (h *Handler) showDashboard(c *fiber.Ctx) error {
	ctx := c.UserContext()
	u := web.CurrentUser(c)
	v := h.Viewer(c, "dashboard")
	acct, err := billing.Balance(ctx, h.DB, u.AccountID)
	if err != nil {
		return err
	}
	d := customer.Dashboard{Available: acct.AvailableMicros, Reserved: acct.ReservedMicros, BaseURL: h.PublicBaseURL}

	// Thirty days ending today, in the account's time zone: the days of the Usage page and the statements,
	// whoever looks (a member's display zone only moves the times shown).
	loc := accounts.LoadZone(acct.TimeZone) // the account row read above holds it
	d.Zone = loc.String()
	now := h.Now().In(loc)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, loc)
	first := today.AddDate(0, 0, -29)
	charges, err := models.SettledSince(ctx, h.DB, u.AccountID, first.UTC())
	if err != nil {
		return err
	}
	d.Spend = make([]customer.DaySpend, 30)
	for i := range d.Spend {
		d.Spend[i].Day = first.AddDate(0, 0, i)
	}
	for _, c := range charges {
		t := c.Start.In(loc)
		day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		if i := int(day.Sub(first).Hours()/24 + 0.5); i >= 0 && i < len(d.Spend) {
			d.Spend[i].Micros += c.Micros
		}
	}

	page, err := h.Videos.List(ctx, u.AccountID, videos.ListParams{Limit: 5, WithDeleted: true})
	if err != nil {
		return err
	}
	d.Recent, d.HasTask = page.Tasks, len(page.Tasks) > 0
	if d.Funded, err = models.Funded(ctx, h.DB.R, u.AccountID); err != nil {
		return err
	}
	if d.HasKey, err = models.Exists(ctx, h.DB.R, &models.APIKey{}, "account_id = ?", u.AccountID); err != nil {
		return err
	}
	return h.Render(c, customer.DashboardPage(v, d))
}
