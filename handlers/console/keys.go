package console

import (
	"videogen/handlers/web"

	"errors"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/apikeys"
	"videogen/models"
	"videogen/views/customer"
)

func (h *Handler) keysPage(c *fiber.Ctx, p customer.KeysPage) error {
	u := web.CurrentUser(c)
	keys, err := models.AccountKeys(c.UserContext(), h.DB.R, u.AccountID)
	if err != nil {
		return err
	}
	if err := models.KeysWithMembers(c.UserContext(), h.DB.R, keys); err != nil {
		return err
	}
	p.Keys, p.Verified = keys, u.Verified()
	return h.Render(c, customer.KeysList(h.Viewer(c, "keys"), p))
}

// showKeys answers GET /console/keys.
func (h *Handler) showKeys(c *fiber.Ctx) error { return h.keysPage(c, customer.KeysPage{}) }

// createKey makes a key and shows its secret on this answer only (never stored, never cached).
func (h *Handler) createKey(c *fiber.Ctx) error {
	name := web.Posted(c, "name")
	secret, k, err := apikeys.Issue(c.UserContext(), h.DB, web.CurrentUser(c), name, h.Now())
	switch {
	case errors.Is(err, apikeys.ErrUnverified):
		c.Status(fiber.StatusForbidden)
		return h.keysPage(c, customer.KeysPage{})
	case errors.Is(err, apikeys.ErrBadName):
		c.Status(fiber.StatusUnprocessableEntity)
		return h.keysPage(c, customer.KeysPage{Name: strings.TrimSpace(name), Error: "Use at most 60 characters, without control characters."})
	case err != nil:
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return h.keysPage(c, customer.KeysPage{NewSecret: secret, NewPrefix: k.Prefix})
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
	if err := h.Keys.Revoke(c.UserContext(), k.Prefix); err != nil {
		return err
	}
	return web.Redirect(c, "/console/keys?notice=key-revoked")
}
