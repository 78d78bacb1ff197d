package console

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/accounts"
	"videogen/views/customer"
)

// saveBillingDetails answers the Wallet page's billing details form (form=billing): the name, address
// and tax id the statements print, and the account's time zone. A refused field is shown again beside
// its message on a 422 page.
func (h *Handler) saveBillingDetails(c *fiber.Ctx) error {
	typed := accounts.BillingDetails{Name: web.Posted(c, "billing_name"), Address: web.Posted(c, "billing_address"),
		TaxID: web.Posted(c, "tax_id"), TimeZone: web.Posted(c, "time_zone")}
	_, err := accounts.SetBillingDetails(c.UserContext(), h.DB, web.CurrentUser(c).AccountID, typed, h.Now())
	var refused accounts.FieldErrors
	if errors.As(err, &refused) {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.walletPage(c, customer.WalletPage{Billing: &customer.BillingForm{BillingDetails: typed, Zones: zones, Errors: refused}})
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console/wallet?notice=billing-saved#billing")
}
