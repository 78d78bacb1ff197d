package console

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/audit"
	"videogen/internal/domain/webhooks"
	"videogen/views/customer"
)

// attemptsPerPage is how many attempts an endpoint's page lists at a time.
const attemptsPerPage = 50

// webhooksPage renders the endpoints list with p's form state.
func (h *Handler) webhooksPage(c *fiber.Ctx, p customer.WebhooksPage) error {
	who := web.TenantOf(c)
	eps, err := h.Webhooks.List(c.UserContext(), who.AccountID)
	if err != nil {
		return err
	}
	p.Endpoints, p.EventTypes, p.Max = eps, webhooks.EventTypes, webhooks.MaxEndpoints
	if p.Events == nil && p.Error == nil {
		p.Events = webhooks.EventTypes
	}
	return h.Render(c, customer.WebhooksList(h.TenantViewer(c, "webhooks"), p))
}

// ShowWebhooks answers GET /console/webhooks (and the staff view of an account's endpoints).
func (h *Handler) ShowWebhooks(c *fiber.Ctx) error {
	if err := h.AuditTenantLook(c, audit.ViewWebhooks, "", ""); err != nil {
		return err
	}
	return h.webhooksPage(c, customer.WebhooksPage{})
}

// addWebhook saves an endpoint and shows its signing secret on this answer only.
func (h *Handler) addWebhook(c *fiber.Ctx) error {
	url, events := web.Posted(c, "url"), web.PostedAll(c, "events")
	ep, secret, err := h.Webhooks.Add(c.UserContext(), web.CurrentUser(c).AccountID, url, events)
	if inv, ok := errors.AsType[*webhooks.Invalid](err); ok {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.webhooksPage(c, customer.WebhooksPage{URL: strings.TrimSpace(url), Events: events, Error: inv})
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return h.webhookPage(c, ep.ID, customer.WebhookPage{NewSecret: secret, Added: true})
}

// webhookPage renders one endpoint with its deliveries.
func (h *Handler) webhookPage(c *fiber.Ctx, id string, p customer.WebhookPage) error {
	who := web.TenantOf(c)
	ep, err := h.Webhooks.Get(c.UserContext(), who.AccountID, id)
	if errors.Is(err, webhooks.ErrNoEndpoint) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	before, _ := strconv.ParseInt(c.Query("before"), 10, 64)
	page, err := h.Webhooks.Attempts(c.UserContext(), ep.ID, max(before, 0), attemptsPerPage)
	if err != nil {
		return err
	}
	p.Endpoint, p.Deliveries, p.EventTypes, p.Paged = *ep, page, webhooks.EventTypes, before > 0
	p.PreviousSigns = ep.PreviousUntil != nil && ep.PreviousUntil.After(h.Now())
	return h.Render(c, customer.WebhookDetail(h.TenantViewer(c, "webhooks"), p))
}

// ShowWebhook answers GET /console/webhooks/{id}: the endpoint, its actions and its deliveries.
func (h *Handler) ShowWebhook(c *fiber.Ctx) error {
	if err := h.AuditTenantLook(c, audit.ViewWebhooks, audit.TargetWebhook, c.Params("id")); err != nil {
		return err
	}
	return h.webhookPage(c, c.Params("id"), customer.WebhookPage{})
}

// webhookAction runs one of the endpoint's actions and goes back to its page with a notice.
func (h *Handler) webhookAction(c *fiber.Ctx) error {
	id, user := c.Params("id"), web.CurrentUser(c)
	ctx := c.UserContext()
	back := "/console/webhooks/" + id
	var err error
	notice := ""
	switch c.Params("action") {
	case "rotate":
		var secret string
		if secret, err = h.Webhooks.Rotate(ctx, user.AccountID, id); err == nil {
			c.Set(fiber.HeaderCacheControl, "no-store")
			return h.webhookPage(c, id, customer.WebhookPage{NewSecret: secret, Rotated: true})
		}
	case "disable":
		err, notice = h.Webhooks.SetEnabled(ctx, user.AccountID, id, false), "webhook-disabled"
	case "enable":
		err, notice = h.Webhooks.SetEnabled(ctx, user.AccountID, id, true), "webhook-enabled"
	case "test":
		if refused, werr := h.webhookSendRefused(c, id, user.AccountID); refused || werr != nil {
			return werr
		}
		err, notice = h.Webhooks.SendTest(ctx, user.AccountID, id, web.Posted(c, "type")), "webhook-test-sent"
	case "delete":
		err, notice, back = h.Webhooks.Delete(ctx, user.AccountID, id), "webhook-deleted", "/console/webhooks"
	default:
		return fiber.ErrNotFound
	}
	if inv, ok := errors.AsType[*webhooks.Invalid](err); ok {
		c.Status(fiber.StatusUnprocessableEntity)
		return h.webhookPage(c, id, customer.WebhookPage{Error: inv})
	}
	if errors.Is(err, webhooks.ErrNoEndpoint) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, back+"?notice="+notice)
}

// webhookSendRefused answers 429 with the endpoint's page saying how long to wait, when the account has
// sent its test events and resends for the minute; refused reports whether it did.
func (h *Handler) webhookSendRefused(c *fiber.Ctx, id string, accountID int64) (refused bool, err error) {
	wait, err := h.WebhookSendWait(c, accountID)
	if err != nil || wait == 0 {
		return false, err
	}
	c.Status(fiber.StatusTooManyRequests)
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int((wait+time.Second-1)/time.Second)))
	return true, h.webhookPage(c, id, customer.WebhookPage{Error: &webhooks.Invalid{Message: web.WebhookSendsRefused(wait)}})
}

// confirmDeleteWebhook asks before deleting (without JavaScript too).
func (h *Handler) confirmDeleteWebhook(c *fiber.Ctx) error {
	ep, err := h.Webhooks.Get(c.UserContext(), web.CurrentUser(c).AccountID, c.Params("id"))
	if errors.Is(err, webhooks.ErrNoEndpoint) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	return h.Render(c, customer.DeleteWebhook(h.Viewer(c, "webhooks"), *ep))
}

// resendWebhook sends one delivery again, with its webhook-id and body.
func (h *Handler) resendWebhook(c *fiber.Ctx) error {
	id := c.Params("id")
	delivery, err := strconv.ParseInt(c.Params("delivery"), 10, 64)
	if err != nil {
		return fiber.ErrNotFound
	}
	if refused, werr := h.webhookSendRefused(c, id, web.CurrentUser(c).AccountID); refused || werr != nil {
		return werr
	}
	err = h.Webhooks.Resend(c.UserContext(), web.CurrentUser(c).AccountID, id, delivery)
	if errors.Is(err, webhooks.ErrNoEndpoint) {
		return fiber.ErrNotFound
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console/webhooks/"+id+"?notice=webhook-resent")
}
