package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// WebhookEndpoint is one of the account's webhook endpoints (GET /v1/webhook_endpoints/{id}). The key
// needs the webhooks:write scope for every call here.
type WebhookEndpoint struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"` // "webhook_endpoint"
	Name              string   `json:"name"`
	URL               string   `json:"url"`
	EventTypes        []string `json:"event_types"`
	SigningSecretHint string   `json:"signing_secret_hint"`
	// SigningSecret is set only in the answers of CreateWebhookEndpoint and RotateWebhookSecret: keep it
	// to verify deliveries (VerifyWebhook); it is never shown again.
	SigningSecret string `json:"signing_secret,omitempty"`
	CreatedAt     int64  `json:"created_at"`
	UpdatedAt     int64  `json:"updated_at"`
}

// WebhookEndpointParams are an endpoint's fields: all three on create; on update, only those set.
type WebhookEndpointParams struct {
	Name       *string  `json:"name,omitempty"`
	URL        *string  `json:"url,omitempty"`
	EventTypes []string `json:"event_types,omitempty"` // "video.completed", "video.failed"
}

// CreateWebhookEndpoint adds an endpoint and returns it with its signing secret. It is not retried: a
// lost answer would leave an endpoint whose secret nobody has.
func (c *Client) CreateWebhookEndpoint(ctx context.Context, p WebhookEndpointParams) (*WebhookEndpoint, error) {
	return c.endpointCall(ctx, http.MethodPost, "/v1/webhook_endpoints", p, false)
}

// GetWebhookEndpoint reads an endpoint (without its secret).
func (c *Client) GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error) {
	return c.endpointCall(ctx, http.MethodGet, "/v1/webhook_endpoints/"+url.PathEscape(id), nil, true)
}

// UpdateWebhookEndpoint changes the fields set in p (EventTypes is the whole new set) and returns the endpoint.
func (c *Client) UpdateWebhookEndpoint(ctx context.Context, id string, p WebhookEndpointParams) (*WebhookEndpoint, error) {
	return c.endpointCall(ctx, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(id), p, true)
}

// RotateWebhookSecret gives the endpoint a new signing secret and returns it with the endpoint. With
// keepOld, the previous secret keeps signing beside it for 24 hours; else it stops at once.
func (c *Client) RotateWebhookSecret(ctx context.Context, id string, keepOld bool) (*WebhookEndpoint, error) {
	body := map[string]bool{"keep_old_secret_active_for_24_hours": keepOld}
	return c.endpointCall(ctx, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(id)+"/rotate_secret", body, false)
}

// DeleteWebhookEndpoint removes an endpoint with its deliveries.
func (c *Client) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	var out struct {
		Deleted bool `json:"deleted"`
	}
	_, err := c.callJSON(ctx, request{method: http.MethodDelete, path: "/v1/webhook_endpoints/" + url.PathEscape(id), retry: true}, &out)
	return err
}

// WebhookTestResult is the receiver's answer to a test event: its HTTP status, 0 when it gave none.
type WebhookTestResult struct {
	EndpointID string `json:"webhook_endpoint_id"`
	EventType  string `json:"event_type"`
	StatusCode int    `json:"status_code"`
}

// TestWebhookEndpoint sends the endpoint a sample event of eventType now and returns how its receiver answered.
func (c *Client) TestWebhookEndpoint(ctx context.Context, id, eventType string) (*WebhookTestResult, error) {
	body, err := json.Marshal(map[string]string{"event_type": eventType})
	if err != nil {
		return nil, err
	}
	var out WebhookTestResult
	_, err = c.callJSON(ctx, request{method: http.MethodPost, path: "/v1/webhook_endpoints/" + url.PathEscape(id) + "/test",
		body: body, retry: false}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// WebhookEndpointList is one page of endpoints, newest first.
type WebhookEndpointList struct {
	Data    []WebhookEndpoint `json:"data"`
	HasMore bool              `json:"has_more"`
}

// ListWebhookEndpoints returns limit endpoints (0: the server's 20) after the one with id after ("": the newest).
func (c *Client) ListWebhookEndpoints(ctx context.Context, after string, limit int) (*WebhookEndpointList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var l WebhookEndpointList
	if _, err := c.callJSON(ctx, request{method: http.MethodGet, path: "/v1/webhook_endpoints", query: q, retry: true}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// AllWebhookEndpoints iterates over every endpoint, newest first, a page at a time. An error is yielded
// once, with a nil endpoint, and ends the iteration.
func (c *Client) AllWebhookEndpoints(ctx context.Context) iter.Seq2[*WebhookEndpoint, error] {
	return func(yield func(*WebhookEndpoint, error) bool) {
		after := ""
		for {
			page, err := c.ListWebhookEndpoints(ctx, after, 100)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Data {
				if !yield(&page.Data[i], nil) {
					return
				}
			}
			if !page.HasMore || len(page.Data) == 0 {
				return
			}
			after = page.Data[len(page.Data)-1].ID
		}
	}
}

func (c *Client) endpointCall(ctx context.Context, method, path string, in any, retry bool) (*WebhookEndpoint, error) {
	r := request{method: method, path: path, retry: retry}
	if in != nil {
		body, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		r.body = body
	}
	var ep WebhookEndpoint
	if _, err := c.callJSON(ctx, r, &ep); err != nil {
		return nil, err
	}
	return &ep, nil
}
