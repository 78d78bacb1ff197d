package console

import (
	"videogen/handlers/web"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/catalog"
	"videogen/views/customer"
)

// showLanding answers GET /: the product in one screen, or the dashboard for a signed-in user.
func (h *Handler) showLanding(c *fiber.Ctx) error {
	if web.CurrentUser(c) != nil {
		return web.Redirect(c, "/console")
	}
	return h.Render(c, customer.Landing(h.Viewer(c, "")))
}

// showPricing answers GET /pricing from the same price table the API bills from, with what each
// model's providers render now.
func (h *Handler) showPricing(c *fiber.Ctx) error {
	prices, err := h.Prices.All(c.UserContext())
	if err != nil {
		return err
	}
	rows := make([]customer.PriceRow, 0, len(catalog.Models))
	for _, m := range catalog.Models {
		row := customer.PriceRow{Model: m, MicrosPerSecond: int64(prices[m.ID])}
		if offer, ok := h.ModelOffer(m.ID, m.Sizes()); ok {
			row.Available, row.Sizes, row.Seconds, row.Inputs, row.Audio, row.Rules = true, offer.Sizes, offer.Seconds, offer.Inputs, offer.Audio, offer.Rules
		}
		rows = append(rows, row)
	}
	return h.Render(c, customer.Pricing(h.Viewer(c, "pricing"), rows, catalog.Ratios))
}

func (h *Handler) showTerms(c *fiber.Ctx) error { return h.Render(c, customer.Terms(h.Viewer(c, ""))) }

func (h *Handler) showPrivacy(c *fiber.Ctx) error {
	return h.Render(c, customer.Privacy(h.Viewer(c, "")))
}
