package handlers

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/catalog"
	"videogen/views"
)

// showLanding answers GET /: the product in one screen, or the dashboard for a signed-in user.
func (h *handler) showLanding(c *fiber.Ctx) error {
	if currentUser(c) != nil {
		return redirect(c, "/console")
	}
	return h.render(c, views.Landing(h.viewer(c, "")))
}

// showPricing answers GET /pricing from the same price table the API bills from.
func (h *handler) showPricing(c *fiber.Ctx) error {
	prices, err := h.Prices.All(c.UserContext())
	if err != nil {
		return err
	}
	rows := make([]views.PriceRow, 0, len(catalog.Models))
	for _, m := range catalog.Models {
		rows = append(rows, views.PriceRow{Model: m, MicrosPerSecond: int64(prices[m.ID])})
	}
	return h.render(c, views.Pricing(h.viewer(c, "pricing"), rows, catalog.Ratios))
}

func (h *handler) showTerms(c *fiber.Ctx) error { return h.render(c, views.Terms(h.viewer(c, ""))) }

func (h *handler) showPrivacy(c *fiber.Ctx) error { return h.render(c, views.Privacy(h.viewer(c, ""))) }
