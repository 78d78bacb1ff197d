package console

import (
	"videogen/handlers/web"

	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/catalog"
	"videogen/models"
	"videogen/views"
	"videogen/views/customer"
)

func (h *Handler) keysPage(c *fiber.Ctx, p customer.KeysPage) error {
	u := web.CurrentUser(c)
	ctx := c.UserContext()
	keys, err := models.AccountKeys(ctx, h.DB.R, u.AccountID)
	if err != nil {
		return err
	}
	if err := models.KeysWithMembers(c.UserContext(), h.DB.R, keys); err != nil {
		return err
	}
	spending, err := apikeys.SpendingOf(ctx, h.DB, u.AccountID, keys, h.Now())
	if err != nil {
		return err
	}
	p.Keys, p.Verified, p.Zone = keys, u.Verified(), spending.Loc.String()
	p.Spent = spending
	p.Limits.Choices = modelChoices()
	if p.Limits.Period == "" {
		p.Limits.Period = apikeys.PeriodMonth
	}
	return h.Render(c, customer.KeysList(h.Viewer(c, "keys"), p))
}

// modelChoices are the models a key may be limited to: the catalog's.
func modelChoices() []string {
	out := make([]string, len(catalog.Models))
	for i, m := range catalog.Models {
		out[i] = m.ID
	}
	return out
}

// postedLimits reads a key's limits from the create or edit form: spend_limit_usd, limit_period and
// models (one per ticked box); the form as posted, to show again with its errors when they are wrong.
func postedLimits(c *fiber.Ctx) (apikeys.Limits, customer.KeyLimitsForm, error) {
	f := customer.KeyLimitsForm{Spend: web.Posted(c, "spend_limit_usd"), Period: web.Posted(c, "limit_period"),
		Models: web.PostedAll(c, "models"), Scopes: web.PostedAll(c, "scopes"), Choices: modelChoices()}
	l, err := apikeys.ParseLimits(f.Spend, f.Period, f.Models, f.Scopes)
	var bad *apikeys.InvalidLimits
	if errors.As(err, &bad) {
		f.Errors = bad.Fields
	}
	return l, f, err
}

// showKeys answers GET /console/keys.
func (h *Handler) showKeys(c *fiber.Ctx) error { return h.keysPage(c, customer.KeysPage{}) }

// createKey makes a key, with its limits if any, and shows its secret on this answer only (never
// stored, never cached).
func (h *Handler) createKey(c *fiber.Ctx) error {
	name := web.Posted(c, "name")
	limits, form, err := postedLimits(c)
	if err != nil {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.keysPage(c, customer.KeysPage{Name: strings.TrimSpace(name), Limits: form})
	}
	secret, k, err := apikeys.IssueLimited(c.UserContext(), h.DB, web.CurrentUser(c), name, limits, h.Now())
	switch {
	case errors.Is(err, apikeys.ErrUnverified):
		c.Status(fiber.StatusForbidden)
		return h.keysPage(c, customer.KeysPage{})
	case errors.Is(err, apikeys.ErrBadName):
		c.Status(fiber.StatusUnprocessableEntity)
		return h.keysPage(c, customer.KeysPage{Name: strings.TrimSpace(name), Error: "Use at most 60 characters, without control characters.", Limits: form})
	case err != nil:
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return h.keysPage(c, customer.KeysPage{NewSecret: secret, NewPrefix: k.Prefix})
}

// showKeyLimits answers GET /console/keys/:id/limits: the key's limits in a form.
func (h *Handler) showKeyLimits(c *fiber.Ctx) error {
	k, err := h.accountKey(c)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		return web.Redirect(c, "/console/keys")
	}
	l := apikeys.LimitsOf(*k)
	f := customer.KeyLimitsForm{Period: l.Period, Models: l.Models, Scopes: l.Scopes, Choices: modelChoices()}
	if l.Spend > 0 {
		f.Spend = views.PlainUSD(int64(l.Spend))
	} else {
		f.Period = apikeys.PeriodMonth
	}
	return h.keyLimitsPage(c, k, f)
}

func (h *Handler) keyLimitsPage(c *fiber.Ctx, k *models.APIKey, f customer.KeyLimitsForm) error {
	loc, err := accounts.Location(c.UserContext(), h.DB, k.AccountID)
	if err != nil {
		return err
	}
	return h.Render(c, customer.KeyLimits(h.Viewer(c, "keys"), customer.KeyLimitsPage{Key: *k, Form: f, Zone: loc.String()}))
}

// saveKeyLimits replaces a current key's limits; the next create with the key is held to them.
func (h *Handler) saveKeyLimits(c *fiber.Ctx) error {
	k, err := h.accountKey(c)
	if err != nil {
		return err
	}
	limits, form, err := postedLimits(c)
	if err != nil {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.keyLimitsPage(c, k, form)
	}
	err = apikeys.SetLimits(c.UserContext(), h.DB, k.AccountID, k.ID, limits)
	if errors.Is(err, apikeys.ErrNoSuchKey) { // revoked meanwhile
		return web.Redirect(c, "/console/keys")
	}
	if err != nil {
		return err
	}
	if h.Keys != nil {
		h.Keys.ForgetAccount(k.AccountID) // a scope taken away stops at once here (other instances: their cache's age)
	}
	return web.Redirect(c, "/console/keys?notice=key-limits-saved")
}

// accountKey finds one of the signed-in account's keys by its id in the URL.
func (h *Handler) accountKey(c *fiber.Ctx) (*models.APIKey, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return nil, fiber.ErrNotFound
	}
	k, err := models.AccountKey(c.UserContext(), h.DB.R, web.CurrentUser(c).AccountID, id)
	if errors.Is(err, models.ErrNotFound) {
		return nil, fiber.ErrNotFound
	}
	return k, err
}

// confirmRevokeKey asks before revoking (without JavaScript too).
func (h *Handler) confirmRevokeKey(c *fiber.Ctx) error {
	k, err := h.accountKey(c)
	if err != nil {
		return err
	}
	if k.RevokedAt != nil {
		return web.Redirect(c, "/console/keys")
	}
	return h.Render(c, customer.RevokeKey(h.Viewer(c, "keys"), *k))
}

// revokeKey disables a key at once on this instance (and within API_KEY_CACHE_TTL elsewhere).
func (h *Handler) revokeKey(c *fiber.Ctx) error {
	k, err := h.accountKey(c)
	if err != nil {
		return err
	}
	if err := h.Keys.Revoke(c.UserContext(), k.Prefix, web.CurrentUser(c).Email); err != nil {
		return err
	}
	return web.Redirect(c, "/console/keys?notice=key-revoked")
}
