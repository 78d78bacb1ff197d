package console

import (
	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/usage"
	"videogen/models"
	"videogen/views/customer"
)

// usageQuery reads the Usage page's query (from, to, group: GET form fields) in the account's zone and,
// when it holds, the report: what the page and its CSV export share, so both show the same numbers.
// A refused query comes back with p.Errors set and no report.
func (h *Handler) usageQuery(c *fiber.Ctx) (customer.UsagePage, *models.Account, error) {
	ctx := c.UserContext()
	acct, err := accounts.Get(ctx, h.DB, web.CurrentUser(c).AccountID)
	if err != nil {
		return customer.UsagePage{}, nil, err
	}
	q := usage.Query{From: web.LogText(c.Query("from"), 40), To: web.LogText(c.Query("to"), 40), Group: web.LogText(c.Query("group"), 40)}
	p := customer.UsagePage{Query: q, Zone: zoneName(acct.TimeZone)}
	r, errs := q.Parse(accounts.LoadZone(acct.TimeZone), h.Now())
	if errs != nil {
		p.Errors = errs
		return p, acct, nil
	}
	if p.Report, err = usage.Build(ctx, h.DB, acct.ID, r); err != nil {
		return p, nil, err
	}
	return p, acct, nil
}

// zoneName names an account's zone for people ("" is UTC).
func zoneName(zone string) string {
	if zone == "" {
		return "UTC"
	}
	return zone
}

// showUsage answers GET /console/usage: videos, seconds and spend over a range of days, per day, model
// or key, and the links to the monthly statements. A range that cannot be shown is a 422 page that says
// why beside its field.
func (h *Handler) showUsage(c *fiber.Ctx) error {
	p, acct, err := h.usageQuery(c)
	if err != nil {
		return err
	}
	if p.Months, err = usage.Months(c.UserContext(), h.DB, acct.ID, accounts.LoadZone(acct.TimeZone), h.Now()); err != nil {
		return err
	}
	if p.Errors != nil {
		c.Status(fiber.StatusUnprocessableEntity)
	}
	return h.Render(c, customer.UsageView(h.Viewer(c, "usage"), p))
}
