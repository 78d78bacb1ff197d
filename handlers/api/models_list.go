package api

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/catalog"
	"videogen/internal/money"
)

type modelItem struct {
	ID         string `json:"id"`
	Object     string `json:"object"`
	Series     string `json:"series"`
	Resolution string `json:"resolution"`
	// What can be sold now: the union of what the model's usable routes render (docs/upstreams.md#capabilities).
	Sizes          map[string]string `json:"sizes"`
	Seconds        []int             `json:"seconds"`
	Inputs         []string          `json:"inputs"`
	Audio          bool              `json:"audio"`
	Rules          []string          `json:"rules"`
	PricePerSecond money.Micros      `json:"price_per_second"`
	OwnedBy        string            `json:"owned_by"`
}

// listModels answers GET /v1/models: the models some upstream credential serves now (all eight by
// default), with the sizes, durations and inputs their routes render, and their current prices.
func (h *handler) listModels(c *fiber.Ctx) error {
	prices, err := h.Prices.All(c.UserContext())
	if err != nil {
		return err
	}
	items := make([]modelItem, 0, len(catalog.Models))
	for _, m := range catalog.Models {
		offer, ok := h.ModelOffer(m.ID, m.Sizes())
		if !ok {
			continue
		}
		items = append(items, modelItem{ID: m.ID, Object: "model", Series: m.Series, Resolution: m.Resolution,
			Sizes: offer.Sizes, Seconds: offer.Seconds, Inputs: offer.Inputs, Audio: offer.Audio, Rules: offer.Rules,
			PricePerSecond: prices[m.ID], OwnedBy: "videogen"})
	}
	return c.JSON(fiber.Map{"object": "list", "data": items})
}
