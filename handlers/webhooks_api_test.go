package handlers_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/webhooks"

	"videogen/internal/testkit"
	"videogen/models"
)

// scopedKey makes a key with the webhooks:write scope through the console and returns its secret.
func scopedKey(t *testing.T, b *browser, name string) string {
	t.Helper()
	p := b.post("/console/keys", "/console/keys", url.Values{"name": {name}, "scopes": {"webhooks:write"}})
	m := secretRE.FindStringSubmatch(p.Body)
	if p.Status != 200 || m == nil {
		t.Fatalf("create a scoped key: %d", p.Status)
	}
	return m[1]
}

// TestWebhookEndpointsThroughOpenAIGo: openai-go v3.96's webhooks.WebhookService — New, Get, Update,
// List (and its auto-pager), RotateSecret, Test and Delete — works unmodified against /v1 with a key of
// the webhooks:write scope, every exchange checked against the OpenAPI document; the secret is in the
// answers that create or rotate only, and signs what the endpoint then receives (client.Webhooks.Unwrap);
// a rotation without keep drops the old secret at once; a key without the scope is refused (403
// key_scope_missing) and adds nothing; another account's endpoint is a 404.
func TestWebhookEndpointsThroughOpenAIGo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		rcv := &hookReceiver{}
		s, _ := startHooks(t, dbURL, nil, rcv)
		b := signUpVerified(t, s, "hooks-api@example.com")
		key := scopedKey(t, b, "webhooks")
		client := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)}))
		ctx := t.Context()

		created, err := client.Webhooks.New(ctx, webhooks.WebhookNewParams{Name: "production", URL: "https://hooks.example.com/api",
			EventTypes: []string{"video.completed"}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(created.SigningSecret, "whsec_") || created.Name != "production" || created.URL != "https://hooks.example.com/api" ||
			!slices.Equal(created.EventTypes, []string{"video.completed"}) || created.CreatedAt == 0 || created.UpdatedAt != created.CreatedAt ||
			!strings.HasSuffix(created.SigningSecret, strings.TrimPrefix(created.SigningSecretHint, "whsec_…")) {
			t.Fatalf("created %+v", created)
		}
		got, err := client.Webhooks.Get(ctx, created.ID)
		if err != nil || got.JSON.ExtraFields["signing_secret"].Valid() || strings.Contains(got.RawJSON(), created.SigningSecret) || got.Name != "production" {
			t.Fatalf("get: %+v %v", got, err)
		}

		// Update: what is given changes; an unchanged update keeps updated_at.
		same, err := client.Webhooks.Update(ctx, created.ID, webhooks.WebhookUpdateParams{Name: openai.String("production")})
		if err != nil || same.UpdatedAt != created.UpdatedAt {
			t.Fatalf("unchanged update: %+v %v", same, err)
		}
		upd, err := client.Webhooks.Update(ctx, created.ID, webhooks.WebhookUpdateParams{Name: openai.String("prod"),
			EventTypes: []string{"video.completed", "video.failed"}})
		if err != nil || upd.Name != "prod" || len(upd.EventTypes) != 2 || upd.URL != created.URL {
			t.Fatalf("update: %+v %v", upd, err)
		}
		if _, err := client.Webhooks.Update(ctx, created.ID, webhooks.WebhookUpdateParams{URL: openai.String("ftp://hooks.example.com/x")}); !isAPIError(err, 400, "invalid_value") {
			t.Errorf("an update to a URL that is not HTTPS: %v", err)
		}
		if _, err := client.Webhooks.New(ctx, webhooks.WebhookNewParams{Name: "x", URL: "https://hooks.example.com/b", EventTypes: []string{"batch.completed"}}); !isAPIError(err, 400, "invalid_value") {
			t.Errorf("an event type the platform does not send: %v", err)
		}

		// List, a page at a time and auto-paged, newest first.
		for _, name := range []string{"second", "third"} {
			if _, err := client.Webhooks.New(ctx, webhooks.WebhookNewParams{Name: name, URL: "https://hooks.example.com/" + name, EventTypes: []string{"video.failed"}}); err != nil {
				t.Fatal(err)
			}
		}
		page, err := client.Webhooks.List(ctx, webhooks.WebhookListParams{Limit: openai.Int(2)})
		if err != nil || len(page.Data) != 2 || !page.HasMore || page.Data[0].Name != "third" {
			t.Fatalf("first page: %+v %v", page, err)
		}
		var names []string
		iter := client.Webhooks.ListAutoPaging(ctx, webhooks.WebhookListParams{Limit: openai.Int(2)})
		for iter.Next() {
			names = append(names, iter.Current().Name)
		}
		if err := iter.Err(); err != nil || !slices.Equal(names, []string{"third", "second", "prod"}) {
			t.Fatalf("auto-paged: %v %v", names, err)
		}

		// Test: sent now, answered with the receiver's status, signed with the endpoint's secret.
		res, err := client.Webhooks.Test(ctx, created.ID, webhooks.WebhookTestParams{EventType: "video.failed"})
		if err != nil || res.StatusCode != 200 || !res.Success || res.WebhookEndpointID != created.ID || res.EventType != "video.failed" {
			t.Fatalf("test: %+v %v", res, err)
		}
		verify := func(secret string) error {
			d := rcv.deliveries()[len(rcv.deliveries())-1]
			c := openai.NewClient(option.WithWebhookSecret(secret), option.WithAPIKey("unused"))
			_, err := c.Webhooks.Unwrap(d.Body, d.Header)
			return err
		}
		if err := verify(created.SigningSecret); err != nil {
			t.Fatalf("the test event does not verify with the secret: %v", err)
		}

		// Rotate without keep: only the new secret signs.
		rot, err := client.Webhooks.RotateSecret(ctx, created.ID, webhooks.WebhookRotateSecretParams{})
		if err != nil || rot.SigningSecret == "" || rot.SigningSecret == created.SigningSecret {
			t.Fatalf("rotate: %+v %v", rot, err)
		}
		if _, err := client.Webhooks.Test(ctx, created.ID, webhooks.WebhookTestParams{EventType: "video.completed"}); err != nil {
			t.Fatal(err)
		}
		if verify(rot.SigningSecret) != nil || verify(created.SigningSecret) == nil {
			t.Fatal("after a rotation without keep, the new secret alone must sign")
		}

		// A key without the scope, and another account's key.
		plain := createKey(t, b, "videos only")
		noScope := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(plain), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)}))
		if _, err := noScope.Webhooks.New(ctx, webhooks.WebhookNewParams{Name: "sneaky", URL: "https://hooks.example.com/s", EventTypes: []string{"video.completed"}}); !isAPIError(err, 403, "key_scope_missing") {
			t.Fatalf("a key without the scope: %v", err)
		}
		if _, err := noScope.Webhooks.List(ctx, webhooks.WebhookListParams{}); !isAPIError(err, 403, "key_scope_missing") {
			t.Fatalf("a key without the scope lists: %v", err)
		}
		other := signUpVerified(t, s, "hooks-other@example.com")
		stranger := openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(scopedKey(t, other, "theirs")), option.WithMaxRetries(0),
			option.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)}))
		for what, call := range map[string]func() error{
			"get": func() error { _, err := stranger.Webhooks.Get(ctx, created.ID); return err },
			"update": func() error {
				_, err := stranger.Webhooks.Update(ctx, created.ID, webhooks.WebhookUpdateParams{Name: openai.String("x")})
				return err
			},
			"rotate": func() error {
				_, err := stranger.Webhooks.RotateSecret(ctx, created.ID, webhooks.WebhookRotateSecretParams{})
				return err
			},
			"test": func() error {
				_, err := stranger.Webhooks.Test(ctx, created.ID, webhooks.WebhookTestParams{EventType: "video.failed"})
				return err
			},
			"delete": func() error { _, err := stranger.Webhooks.Delete(ctx, created.ID); return err },
		} {
			if err := call(); !isAPIError(err, 404, "not_found") {
				t.Errorf("another account's %s of the endpoint: %v", what, err)
			}
		}
		var endpoints int64
		s.DB.R.Model(&models.WebhookEndpoint{}).Where("name = ?", "sneaky").Count(&endpoints)
		if endpoints != 0 {
			t.Error("a key without the scope added an endpoint")
		}

		// Delete.
		del, err := client.Webhooks.Delete(ctx, created.ID)
		if err != nil || !del.Deleted || del.ID != created.ID {
			t.Fatalf("delete: %+v %v", del, err)
		}
		if _, err := client.Webhooks.Get(ctx, created.ID); !isAPIError(err, 404, "not_found") {
			t.Fatalf("a deleted endpoint: %v", err)
		}
		b.get("/console/webhooks").contains(t, "https://hooks.example.com/third")

		// The keys page names the scope, and the key's limits form keeps it ticked (saving it keeps it).
		b.get("/console/keys").contains(t, "also <code>webhooks:write</code>")
		var k models.APIKey
		s.DB.R.Where("prefix = ?", key[:11]).Take(&k)
		b.get(fmt.Sprintf("/console/keys/%d/limits", k.ID)).contains(t, `id="scope-webhooks" name="scopes" value="webhooks:write" checked`)
	})
}

// isAPIError reports whether err is the API's refusal with this status and code.
func isAPIError(err error, status int, code string) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == status && apiErr.Code == code
}
