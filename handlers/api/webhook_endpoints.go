package api

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/webhooks"
	"videogen/internal/refusal"
	"videogen/models"
)

// OpenAI's webhook-endpoints API (openai-go v3.96 webhooks.WebhookService: New, Get, Update, List,
// Delete, RotateSecret, Test), on the account's endpoints, for keys with the webhooks:write scope
// (docs/webhooks.md, "The API").

// webhookEndpoint is OpenAI's webhooks.WebhookEndpoint; SigningSecret only in the answers that create
// or rotate (WebhookEndpointWithSecret).
type webhookEndpoint struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Name              string   `json:"name"`
	URL               string   `json:"url"`
	EventTypes        []string `json:"event_types"`
	SigningSecret     string   `json:"signing_secret,omitempty"`
	SigningSecretHint string   `json:"signing_secret_hint"`
	CreatedAt         int64    `json:"created_at"`
	UpdatedAt         int64    `json:"updated_at"`
}

func endpointJSON(ep *models.WebhookEndpoint, secret string) webhookEndpoint {
	types := ep.EventTypes()
	if types == nil {
		types = []string{}
	}
	return webhookEndpoint{ID: ep.ID, Object: "webhook_endpoint", Name: ep.Name, URL: ep.URL, EventTypes: types,
		SigningSecret: secret, SigningSecretHint: ep.SecretHint, CreatedAt: ep.CreatedAt.Unix(), UpdatedAt: ep.UpdatedAt.Unix()}
}

// requireWebhookScope refuses a key without webhooks:write: a key made for creating videos cannot add
// endpoints that would receive the account's events.
func (h *handler) requireWebhookScope(c *fiber.Ctx) error {
	if !apikeys.HasScope(web.Principal(c).Scopes, apikeys.ScopeWebhooks) {
		return refusal.New("key_scope_missing", "This API key may not manage webhook endpoints: it lacks the %s scope. Create a key with it on the API keys page (tick \"May manage webhook endpoints\") and use that one.", apikeys.ScopeWebhooks)
	}
	return c.Next()
}

// webhookRefusal turns the webhook service's errors into the API's refusals.
func webhookRefusal(err error) error {
	if inv, ok := errors.AsType[*webhooks.Invalid](err); ok {
		param := inv.Field
		if param == "events" {
			param = "event_types"
		}
		if param == "" {
			return refusal.New("invalid_value", "%s", inv.Message)
		}
		return refusal.Field("invalid_value", param, "%s", inv.Message)
	}
	switch {
	case errors.Is(err, webhooks.ErrNoEndpoint):
		return refusal.NotFound
	case errors.Is(err, webhooks.ErrTestsBusy):
		return &refusal.Error{Code: "rate_limited", RetryAfter: 10,
			Message: "Two test events of this account are being sent already. Try again when they have been answered (10 seconds at most)."}
	}
	return err
}

// readJSON decodes the request's JSON object into v, refusing what is not one.
func readJSON(c *fiber.Ctx, v any) error {
	if len(c.Body()) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Body(), v); err != nil {
		return refusal.New("invalid_json", "The body is not a JSON object of the fields this operation takes: %s.", err.Error())
	}
	return nil
}

// createWebhookEndpoint answers POST /v1/webhook_endpoints (Webhooks.New): the endpoint with its
// signing secret, shown this once.
func (h *handler) createWebhookEndpoint(c *fiber.Ctx) error {
	var in struct {
		Name       *string  `json:"name"`
		URL        *string  `json:"url"`
		EventTypes []string `json:"event_types"`
	}
	if err := readJSON(c, &in); err != nil {
		return err
	}
	switch {
	case in.URL == nil:
		return refusal.Field("missing_field", "url", "url is required: the HTTPS URL that receives the events.")
	case in.EventTypes == nil:
		return refusal.Field("missing_field", "event_types", "event_types is required: the events to send, of %s.", joinTypes())
	}
	name := ""
	if in.Name != nil {
		name = *in.Name
	}
	ep, secret, err := h.Webhooks.AddNamed(c.UserContext(), web.Principal(c).AccountID, name, *in.URL, in.EventTypes)
	if err != nil {
		return webhookRefusal(err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(endpointJSON(ep, secret))
}

// joinTypes names the event types an endpoint may receive, for a message.
func joinTypes() string { return strings.Join(webhooks.EventTypes, " and ") }

// getWebhookEndpoint answers GET /v1/webhook_endpoints/{id} (Webhooks.Get).
func (h *handler) getWebhookEndpoint(c *fiber.Ctx) error {
	ep, err := h.Webhooks.Get(c.UserContext(), web.Principal(c).AccountID, c.Params("id"))
	if err != nil {
		return webhookRefusal(err)
	}
	return c.JSON(endpointJSON(ep, ""))
}

// updateWebhookEndpoint answers POST /v1/webhook_endpoints/{id} (Webhooks.Update): name, url and
// event_types (the whole new set) as given; what is left out stays.
func (h *handler) updateWebhookEndpoint(c *fiber.Ctx) error {
	var in struct {
		Name       *string  `json:"name"`
		URL        *string  `json:"url"`
		EventTypes []string `json:"event_types"`
	}
	if err := readJSON(c, &in); err != nil {
		return err
	}
	ep, err := h.Webhooks.Update(c.UserContext(), web.Principal(c).AccountID, c.Params("id"), webhooks.Change{Name: in.Name, URL: in.URL, Events: in.EventTypes})
	if err != nil {
		return webhookRefusal(err)
	}
	return c.JSON(endpointJSON(ep, ""))
}

// webhookEndpointList is OpenAI's webhooks.WebhookEndpointList (a CursorPage).
type webhookEndpointList struct {
	Object  string            `json:"object"`
	Data    []webhookEndpoint `json:"data"`
	FirstID *string           `json:"first_id"`
	LastID  *string           `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

// listWebhookEndpoints answers GET /v1/webhook_endpoints (Webhooks.List, ListAutoPaging): newest first,
// limit (1–100, default 20) after the endpoint with id after.
func (h *handler) listWebhookEndpoints(c *fiber.Ctx) error {
	limit := 20
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return refusal.Field("invalid_value", "limit", "limit is a whole number from 1 to 100 (default 20).")
		}
		limit = n
	}
	eps, more, err := h.Webhooks.ListPage(c.UserContext(), web.Principal(c).AccountID, web.LogText(c.Query("after"), 80), limit)
	if err != nil {
		return webhookRefusal(err)
	}
	out := webhookEndpointList{Object: "list", Data: make([]webhookEndpoint, len(eps)), HasMore: more}
	for i := range eps {
		out.Data[i] = endpointJSON(&eps[i], "")
	}
	if len(eps) > 0 {
		first, last := eps[0].ID, eps[len(eps)-1].ID
		out.FirstID, out.LastID = &first, &last
	}
	return c.JSON(out)
}

// deleteWebhookEndpoint answers DELETE /v1/webhook_endpoints/{id} (Webhooks.Delete).
func (h *handler) deleteWebhookEndpoint(c *fiber.Ctx) error {
	id := c.Params("id")
	if err := h.Webhooks.Delete(c.UserContext(), web.Principal(c).AccountID, id); err != nil {
		return webhookRefusal(err)
	}
	return c.JSON(fiber.Map{"id": id, "object": "webhook_endpoint.deleted", "deleted": true})
}

// rotateWebhookSecret answers POST /v1/webhook_endpoints/{id}/rotate_secret (Webhooks.RotateSecret):
// the endpoint with its new secret, shown this once; the old one stops at once unless
// keep_old_secret_active_for_24_hours is true.
func (h *handler) rotateWebhookSecret(c *fiber.Ctx) error {
	var in struct {
		Keep bool `json:"keep_old_secret_active_for_24_hours"`
	}
	if err := readJSON(c, &in); err != nil {
		return err
	}
	p := web.Principal(c)
	secret, err := h.Webhooks.RotateNow(c.UserContext(), p.AccountID, c.Params("id"), in.Keep)
	if err != nil {
		return webhookRefusal(err)
	}
	ep, err := h.Webhooks.Get(c.UserContext(), p.AccountID, c.Params("id"))
	if err != nil {
		return webhookRefusal(err)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(endpointJSON(ep, secret))
}

// testWebhookEndpoint answers POST /v1/webhook_endpoints/{id}/test (Webhooks.Test): a sample event of
// event_type sent now, and the status the receiver answered (0: no answer).
func (h *handler) testWebhookEndpoint(c *fiber.Ctx) error {
	var in struct {
		EventType string `json:"event_type"`
	}
	if err := readJSON(c, &in); err != nil {
		return err
	}
	if in.EventType == "" {
		return refusal.Field("missing_field", "event_type", "event_type is required: %s.", joinTypes())
	}
	id := c.Params("id")
	if wait, err := h.WebhookSendWait(c, web.Principal(c).AccountID); err != nil {
		return err
	} else if wait > 0 {
		return &refusal.Error{Code: "rate_limited", RetryAfter: int((wait + time.Second - 1) / time.Second), Message: web.WebhookSendsRefused(wait)}
	}
	status, err := h.Webhooks.TestNow(c.UserContext(), web.Principal(c).AccountID, id, in.EventType)
	if err != nil {
		return webhookRefusal(err)
	}
	return c.JSON(fiber.Map{"object": "webhook_endpoint.test", "webhook_endpoint_id": id, "event_type": in.EventType,
		"status_code": status, "success": true})
}
