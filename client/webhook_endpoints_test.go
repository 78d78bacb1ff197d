package client_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/client"
	"videogen/internal/server"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestWebhookEndpoints: the client manages the account's endpoints with a webhooks:write key — create
// (the secret once), get, update, list all, test (the receiver's status), rotate, delete — every
// exchange checked against the OpenAPI document; VerifyWebhook accepts what the test event carried
// under the secret create returned; a key without the scope gets the typed key_scope_missing refusal.
func TestWebhookEndpoints(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var body []byte
	policy := testkit.ServeHTTPSHost(t, "hooks.example.com", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, body = r, b
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	s := testkit.StartWith(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"}, server.Options{ImportPolicy: &policy})
	plain, _ := newClient(t, s)
	ctx := context.Background()
	if _, err := plain.ListWebhookEndpoints(ctx, "", 0); err == nil {
		t.Fatal("a key without the scope listed endpoints")
	} else if e, ok := client.AsAPIError(err); !ok || e.Status != 403 || e.Code != "key_scope_missing" {
		t.Fatalf("a key without the scope: %v", err)
	}
	// A key given the scope (as the console's key form or `videogen keys create --scope` do) before its first use.
	acct := s.NewAccount(t, "10")
	if err := s.DB.W.Model(&models.APIKey{}).Where("prefix = ?", acct.Key[:11]).Update("scopes", "webhooks:write").Error; err != nil {
		t.Fatal(err)
	}
	c := client.New(s.URL, acct.Key, validated(t))

	name, u := "ci", "https://hooks.example.com/in"
	ep, err := c.CreateWebhookEndpoint(ctx, client.WebhookEndpointParams{Name: &name, URL: &u, EventTypes: []string{"video.completed"}})
	if err != nil || !strings.HasPrefix(ep.SigningSecret, "whsec_") || ep.Name != "ci" {
		t.Fatalf("create: %+v %v", ep, err)
	}
	if g, err := c.GetWebhookEndpoint(ctx, ep.ID); err != nil || g.SigningSecret != "" || g.URL != u {
		t.Fatalf("get: %+v %v", g, err)
	}
	renamed := "ci-2"
	if up, err := c.UpdateWebhookEndpoint(ctx, ep.ID, client.WebhookEndpointParams{Name: &renamed}); err != nil || up.Name != "ci-2" {
		t.Fatalf("update: %+v %v", up, err)
	}
	var all []string
	for e, err := range c.AllWebhookEndpoints(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, e.ID)
	}
	if len(all) != 1 || all[0] != ep.ID {
		t.Fatalf("all endpoints: %v", all)
	}
	res, err := c.TestWebhookEndpoint(ctx, ep.ID, "video.completed")
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("test: %+v %v", res, err)
	}
	mu.Lock()
	ev, err := client.VerifyWebhook(body, got.Header, ep.SigningSecret, time.Now())
	mu.Unlock()
	if err != nil || ev.Type != "video.completed" || !strings.HasPrefix(ev.Data.ID, "video_test") {
		t.Fatalf("the test event: %+v %v", ev, err)
	}
	rot, err := c.RotateWebhookSecret(ctx, ep.ID, true)
	if err != nil || rot.SigningSecret == "" || rot.SigningSecret == ep.SigningSecret {
		t.Fatalf("rotate: %+v %v", rot, err)
	}
	if err := c.DeleteWebhookEndpoint(ctx, ep.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWebhookEndpoint(ctx, ep.ID); err == nil {
		t.Fatal("a deleted endpoint was found")
	}
}
