package support

import (
	"videogen/handlers/web"

	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/billing"
	"videogen/internal/domain/audit"
	"videogen/internal/money"
	"videogen/internal/staff/admin"
	"videogen/models"
	"videogen/views/staff"
)

// What admins change (docs/support.md). Every form is posted twice: the first answer states exactly what
// will happen, with the values in hidden fields and confirm=yes; only the second changes anything, and
// then redirects back (303). Input that cannot be applied is shown again with 422 and what is wrong.
// Each change and its audit row are one transaction, in the domain (billing, internal/staff/admin).

// admin is the domain service for account and role changes, with this instance's key cache, so a
// disable or re-enable holds here at once.
func (h *handler) admin() *admin.Service {
	return &admin.Service{DB: h.DB, Tasks: h.Videos.Tasks, Auth: h.Auth, Keys: h.Keys, Now: h.Now}
}

// confirmed reports whether the form is the second, confirming post.
func confirmed(c *fiber.Ctx) bool { return web.Posted(c, "confirm") == "yes" }

// invalidInput is the message of input the domain refused as it was typed.
func invalidInput(err error) (string, bool) {
	var ie *billing.InvalidError
	if errors.As(err, &ie) {
		return ie.Msg, true
	}
	var re *audit.ReasonError
	if errors.As(err, &re) {
		return re.Msg, true
	}
	return "", false
}

// adjustBalance credits or debits the tenant's available balance.
func (h *handler) adjustBalance(c *fiber.Ctx) error {
	t := web.TenantOf(c)
	p := staff.AdjustPage{Account: t.Staff.Account, Owner: t.Staff.OwnerEmail, Base: t.Base,
		Form: staff.AdjustForm{Direction: web.Posted(c, "direction"), Amount: web.Posted(c, "amount"), Reason: web.Posted(c, "reason"),
			CustomerNote: web.Posted(c, "customer_note")},
		AllowNegative: web.Posted(c, "allow_negative") == "yes"}
	show := func(status int) error {
		c.Status(status)
		return h.Render(c, staff.AdjustBalance(h.TenantViewer(c, "account"), p))
	}
	amount, err := billing.ParseAdjustment(p.Form.Direction, p.Form.Amount)
	adj := billing.Adjustment{AccountID: t.AccountID, Amount: amount, Reason: p.Form.Reason, CustomerNote: p.Form.CustomerNote, AllowNegative: p.AllowNegative,
		By: h.StaffActor(c), At: h.Now()}
	preview := func() error {
		pre, err := adj.Preview(c.UserContext(), h.DB)
		if err != nil {
			return err
		}
		p.Confirm, p.Amount, p.Available, p.After, p.Negative = true, int64(amount), int64(pre.Available), int64(pre.After), pre.Negative
		return nil
	}
	if err == nil {
		err = preview()
	}
	if msg, ok := invalidInput(err); ok {
		p.Form.Error = msg
		return show(fiber.StatusUnprocessableEntity)
	}
	if err != nil {
		return err
	}
	if !confirmed(c) {
		return show(fiber.StatusOK)
	}
	if p.Negative && !p.AllowNegative {
		p.Form.Error = "Tick the box to take the available balance below zero, or cancel."
		return show(fiber.StatusUnprocessableEntity)
	}
	if _, err := adj.Apply(c.UserContext(), h.DB); errors.Is(err, billing.ErrWouldGoNegative) {
		// The balance went down since the confirmation was shown: show the new figures and ask again.
		if err := preview(); err != nil {
			return err
		}
		p.Form.Error = "The balance changed since you reviewed this debit, which now takes it below zero. Check the figures and confirm again."
		return show(fiber.StatusConflict)
	} else if err != nil {
		return err
	}
	return web.Redirect(c, t.Base+"?notice=balance-adjusted")
}

// disableAccount disables the tenant, once the admin has seen what that does.
func (h *handler) disableAccount(c *fiber.Ctx) error {
	t := web.TenantOf(c)
	p := staff.AccountStatePage{Account: t.Staff.Account, Owner: t.Staff.OwnerEmail, Base: t.Base, Action: "disable", Reason: web.Posted(c, "reason")}
	show := func(status int) error {
		c.Status(status)
		return h.Render(c, staff.AccountState(h.TenantViewer(c, "account"), p))
	}
	refuse := func(status int, msg string) error {
		p.Error = msg
		return show(status)
	}
	if _, err := audit.CheckReason(p.Reason); err != nil {
		msg, _ := invalidInput(err)
		return refuse(fiber.StatusUnprocessableEntity, msg)
	}
	if !confirmed(c) {
		plan, err := h.admin().PlanDisable(c.UserContext(), t.AccountID)
		if err != nil {
			return err
		}
		switch {
		case plan.Account.Disabled():
			p.Account = plan.Account
			return refuse(fiber.StatusConflict, "This account is already disabled.")
		case len(plan.StaffUsers) > 0:
			return refuse(fiber.StatusUnprocessableEntity, "This account has staff users ("+strings.Join(plan.StaffUsers, ", ")+
				"). Change their role to member first: disabling would lock them out.")
		}
		p.Plan, p.Confirm = plan, true
		return show(fiber.StatusOK)
	}
	_, err := h.admin().Disable(c.UserContext(), h.StaffActor(c), t.AccountID, p.Reason)
	switch {
	case errors.Is(err, admin.ErrAlreadyDisabled):
		return refuse(fiber.StatusConflict, "This account is already disabled.")
	case errors.Is(err, admin.ErrStaffAccount):
		return refuse(fiber.StatusUnprocessableEntity, "This account has staff users. Change their role to member first: disabling would lock them out.")
	case err != nil:
		return err
	}
	return web.Redirect(c, t.Base+"?notice=account-disabled")
}

// enableAccount re-enables the tenant (nothing is lost by it, so it is not asked twice).
func (h *handler) enableAccount(c *fiber.Ctx) error {
	t := web.TenantOf(c)
	p := staff.AccountStatePage{Account: t.Staff.Account, Owner: t.Staff.OwnerEmail, Base: t.Base, Action: "enable", Reason: web.Posted(c, "reason")}
	err := h.admin().Enable(c.UserContext(), h.StaffActor(c), t.AccountID, p.Reason)
	msg, invalid := invalidInput(err)
	switch {
	case invalid:
		p.Error = msg
		c.Status(fiber.StatusUnprocessableEntity)
	case errors.Is(err, admin.ErrNotDisabled):
		p.Error = "This account is not disabled."
		c.Status(fiber.StatusConflict)
	case err != nil:
		return err
	default:
		return web.Redirect(c, t.Base+"?notice=account-enabled")
	}
	return h.Render(c, staff.AccountState(h.TenantViewer(c, "account"), p))
}

// setRole gives a user a role. The change holds from the user's next page: roles are read per request.
func (h *handler) setRole(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("user"), 10, 64)
	if err != nil || id <= 0 {
		return fiber.ErrNotFound
	}
	ch, err := h.admin().SetRole(c.UserContext(), h.StaffActor(c), id, web.Posted(c, "role"), web.Posted(c, "reason"))
	if errors.Is(err, admin.ErrNoSuchUser) {
		return fiber.ErrNotFound
	}
	if err != nil {
		m := staff.AdminMessage{Title: "The role was not changed", Back: "/support", BackLabel: "← Staff overview"}
		var u models.User // the user as far as it could be read, for the message and the way back
		if found, uerr := models.UserByID(c.UserContext(), h.DB.R, id); uerr == nil {
			u = *found
			m.Back, m.BackLabel = "/support/accounts/"+strconv.FormatInt(u.AccountID, 10), "← Account "+strconv.FormatInt(u.AccountID, 10)
		}
		msg, invalid := invalidInput(err)
		switch {
		case invalid:
			m.Message = msg
			c.Status(fiber.StatusUnprocessableEntity)
		case errors.Is(err, admin.ErrBadRole):
			m.Message = "Choose member, support or admin."
			c.Status(fiber.StatusUnprocessableEntity)
		case errors.Is(err, admin.ErrLastAdmin):
			m.Message = u.Email + " is the only admin. Make another user admin first, so that someone can still grant roles and re-enable accounts."
			c.Status(fiber.StatusConflict)
		default:
			return err
		}
		return h.Render(c, staff.AdminRefused(h.Viewer(c, "support-search"), m))
	}
	if ch.User.ID == web.CurrentUser(c).ID && !ch.User.Staff() {
		return web.Redirect(c, "/console") // no staff page is theirs any more
	}
	return web.Redirect(c, "/support/accounts/"+strconv.FormatInt(ch.User.AccountID, 10)+"?notice=role-changed")
}

// priceForm is the price table as the form shows it: the stored rows, and what was typed in each.
func (h *handler) priceForm(c *fiber.Ctx) ([]models.Price, []staff.PriceEdit, error) {
	stored, err := billing.PriceRows(c.UserContext(), h.DB.R)
	if err != nil {
		return nil, nil, err
	}
	out := make([]staff.PriceEdit, 0, len(stored))
	for _, r := range stored {
		out = append(out, staff.PriceEdit{Model: r.Model, Current: r.MicrosPerSecond, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy,
			Typed: money.Micros(r.MicrosPerSecond).String()})
	}
	return stored, out, nil
}

// showPrices is the price table with its form.
func (h *handler) showPrices(c *fiber.Ctx) error {
	_, rows, err := h.priceForm(c)
	if err != nil {
		return err
	}
	return h.Render(c, staff.PriceTable(h.Viewer(c, "support-prices"), staff.PricesPage{Rows: rows}))
}

// setPrices changes the prices that differ from the ones the admin saw (billing.ReadPriceEdits), once
// confirmed.
func (h *handler) setPrices(c *fiber.Ctx) error {
	stored, rows, err := h.priceForm(c)
	if err != nil {
		return err
	}
	p := staff.PricesPage{Reason: web.Posted(c, "reason")}
	show := func(status int) error {
		c.Status(status)
		return h.Render(c, staff.PriceTable(h.Viewer(c, "support-prices"), p))
	}
	typed, seen := map[string]string{}, map[string]string{}
	for _, name := range postedFields(c, "price_") {
		typed[name] = web.Posted(c, "price_"+name)
		seen[name] = web.Posted(c, "was_"+name)
	}
	edits := billing.ReadPriceEdits(stored, typed, seen)
	for i, r := range edits.Rows {
		// The form shown again keeps the base the admin saw, so a change made meanwhile is still caught.
		rows[i].Typed, rows[i].Current, rows[i].Error = r.Typed, int64(r.Seen), r.Error
	}
	p.Rows = rows
	switch {
	case len(edits.Unknown) > 0:
		p.Error = "There is no model " + strconv.Quote(edits.Unknown[0]) + ": prices exist only for the models of the catalog."
		return show(fiber.StatusUnprocessableEntity)
	case !edits.Valid():
		p.Error = "Some prices cannot be used: see the rows marked below."
		return show(fiber.StatusUnprocessableEntity)
	}
	if _, err := audit.CheckReason(p.Reason); err != nil {
		p.Error, _ = invalidInput(err)
		return show(fiber.StatusUnprocessableEntity)
	}
	if len(edits.Changes) == 0 {
		p.Error = "No price was changed: type a new price in at least one row."
		return show(fiber.StatusUnprocessableEntity)
	}
	p.Changes = make([]staff.PriceChangeRow, len(edits.Changes))
	for i, ch := range edits.Changes {
		p.Changes[i] = staff.PriceChangeRow{Model: ch.Model, Old: int64(ch.Old), New: int64(ch.New)}
	}
	if !confirmed(c) {
		p.Confirm = true
		return show(fiber.StatusOK)
	}
	err = billing.SetPrices(c.UserContext(), h.DB, h.StaffActor(c), p.Reason, edits.Changes, h.Now())
	if errors.Is(err, billing.ErrPriceChanged) {
		// Someone changed a price meanwhile: show the table as it is now, with what this admin typed.
		_, fresh, ferr := h.priceForm(c)
		if ferr != nil {
			return ferr
		}
		for i := range fresh {
			fresh[i].Typed = rows[i].Typed
		}
		p.Rows, p.Changes = fresh, nil
		p.Error = "Another admin changed a price since you opened this form. Check the current prices and review your changes again."
		return show(fiber.StatusConflict)
	}
	if msg, ok := invalidInput(err); ok {
		p.Error, p.Changes = msg, nil
		return show(fiber.StatusUnprocessableEntity)
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/support/prices?notice=prices-saved")
}

// postedFields lists the names of the posted fields that start with prefix, without it.
func postedFields(c *fiber.Ctx, prefix string) []string {
	var out []string
	c.Request().PostArgs().VisitAll(func(k, _ []byte) {
		if name, ok := strings.CutPrefix(string(k), prefix); ok {
			out = append(out, name)
		}
	})
	return out
}
