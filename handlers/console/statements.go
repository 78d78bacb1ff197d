package console

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/accounts"
	"videogen/internal/domain/usage"
	"videogen/views"
	"videogen/views/customer"
)

// showStatement answers GET /console/statements/:month (YYYY-MM): the account's statement of that month
// in its zone, printable. A month that is not one, in the future or before the account was opened is a
// 404 page that says which months have statements.
func (h *Handler) showStatement(c *fiber.Ctx) error {
	ctx := c.UserContext()
	v := h.Viewer(c, "statements")
	acct, err := accounts.Get(ctx, h.DB, web.CurrentUser(c).AccountID)
	if err != nil {
		return err
	}
	loc := accounts.LoadZone(acct.TimeZone)
	month, err := usage.ParseMonth(c.Params("month"), loc)
	var s *usage.Statement
	if err == nil {
		s, err = usage.BuildStatement(ctx, h.DB, acct, month, h.Now())
	}
	if errors.Is(err, usage.ErrNoStatement) {
		c.Status(fiber.StatusNotFound)
		return h.Render(c, views.ErrorPage(v, fiber.StatusNotFound, "No statement for this month",
			"Statements are by month, written as YYYY-MM (such as "+usage.MonthOf(h.Now(), loc).Format("2006-01")+
				"), from the month your account was opened up to this one. The Statements page lists every month with one."))
	}
	if err != nil {
		return err
	}
	p := customer.StatementPage{S: s, Account: acct, Billing: accounts.BillingDetailsOf(acct), Zone: zoneName(acct.TimeZone)}
	if prev := month.AddDate(0, -1, 0); !prev.Before(usage.MonthOf(acct.CreatedAt, loc)) {
		p.Prev = "/console/statements/" + customer.MonthKey(prev)
	}
	if !s.Partial {
		p.Next = "/console/statements/" + customer.MonthKey(s.End)
	}
	return h.Render(c, customer.StatementView(v, p))
}
