package console

import (
	"videogen/handlers/web"

	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/auth"
	"videogen/internal/infra/tzlist"
	"videogen/views/customer"
)

// zones offered in the account settings and the billing details: UTC, then every IANA zone
// (internal/infra/tzlist); any IANA name the browser reports works too.
var zones = append([]string{"UTC"}, tzlist.All()...)

func (h *Handler) accountPage(c *fiber.Ctx, errs map[string]string) error {
	u := web.CurrentUser(c)
	p := customer.AccountPage{Name: u.AccountName, Errors: errs, Zones: zones, TimeZone: u.TimeZone}
	if errs["account_name"] != "" {
		p.Name = web.Posted(c, "account_name")
	}
	return h.Render(c, customer.AccountView(h.Viewer(c, ""), p))
}

// showAccount answers GET /console/account.
func (h *Handler) showAccount(c *fiber.Ctx) error { return h.accountPage(c, nil) }

// updateAccount answers the account page's forms, which post to the page's own URL so that a refused
// one is shown again where it came from; a hidden field says which form it is.
func (h *Handler) updateAccount(c *fiber.Ctx) error {
	switch web.Posted(c, "form") {
	case "timezone":
		return h.saveTimeZone(c)
	case "password":
		return h.changePassword(c)
	case "name":
		return h.renameAccount(c)
	case "two-step":
		return h.requireTwoStep(c)
	}
	return fiber.NewError(fiber.StatusBadRequest, "This form is not one of the account page's")
}

// saveTimeZone stores the zone the console shows times in ("" = the browser's).
func (h *Handler) saveTimeZone(c *fiber.Ctx) error {
	err := accounts.SetTimeZone(c.UserContext(), h.DB, web.CurrentUser(c).ID, web.Posted(c, "tz"), h.Now())
	if errors.Is(err, accounts.ErrBadTimeZone) {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.accountPage(c, map[string]string{"tz": "Choose a time zone from the list."})
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console/account?notice=timezone-saved")
}

// renameAccount names the account (owners and admins: the route requires members.RenameAccount).
func (h *Handler) renameAccount(c *fiber.Ctx) error {
	_, err := accounts.Rename(c.UserContext(), h.DB, web.CurrentUser(c).AccountID, web.Posted(c, "account_name"), h.Now())
	if errors.Is(err, accounts.ErrBadAccountName) {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.accountPage(c, map[string]string{"account_name": accounts.NameProblem(err)})
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console/account?notice=account-renamed")
}

// requireTwoStep sets whether every member must sign in with two steps (owners: the route requires
// members.RequireTwoStep). Members without it are sent to set it up on their next page.
func (h *Handler) requireTwoStep(c *fiber.Ctx) error {
	on := web.Posted(c, "require") != ""
	if err := accounts.RequireSecondFactor(c.UserContext(), h.DB, web.CurrentUser(c).AccountID, on, h.Now()); err != nil {
		return err
	}
	if on {
		return web.Redirect(c, "/console/account?notice=two-step-required")
	}
	return web.Redirect(c, "/console/account?notice=two-step-optional")
}

// changePassword sets a new password, ends every session, and signs this browser in afresh.
func (h *Handler) changePassword(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	errs, err := h.Auth.ChangePassword(c.UserContext(), u, web.Posted(c, "current"), web.Posted(c, "password"))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.TooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.accountPage(c, errs)
	}
	if err := h.startSession(c, u.ID); err != nil { // every session ended with the change, this one too
		return err
	}
	return web.Redirect(c, "/console/account?notice=password-changed")
}
