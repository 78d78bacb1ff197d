package upstream_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/httpapi"
	"videogen/models"
)

// TestSecretsNeverKept: a provider whose error answers echo the key it was sent (some do, quoting the
// Authorization header) never gets the key into an error, the credential's last error (which staff and
// `videogen upstreams status` read) or a failed task's message.
func TestSecretsNeverKept(t *testing.T) {
	const secret = "sk-very-secret-123456"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		echo := strings.ReplaceAll(r.Header.Get("Authorization"), `"`, "")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte(`{"error":{"code":"bad_gateway","message":"upstream saw ` + echo + `"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"v1","status":"failed","error":{"code":"internal","message":"failed for ` + echo + `"}}`))
	}))
	defer srv.Close()
	h := upstream.NewHealth(upstream.HealthConfig{Failures: 5, Cooldown: time.Second, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	cred := upstream.Credential{ID: "c", Kind: "openai", Secret: secret, MaxConcurrency: 1,
		Models: map[string]upstream.Route{"videogen-2.0-720p": {UpstreamModel: "m"}}, Provider: httpapi.New("openai", srv.URL, 5*time.Second)}
	pool := upstream.NewPool(nil, h, []upstream.Credential{cred})
	ctx := context.Background()

	_, err := pool.Submit(ctx, cred, upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "x", Seconds: 4}})
	if !errors.Is(err, upstream.ErrTransient) || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "[redacted]") {
		t.Fatalf("submit error %v", err)
	}
	if last := h.Snapshot("c").LastError; last == "" || strings.Contains(last, secret) {
		t.Fatalf("last error kept %q", last)
	}
	st, err := pool.Poll(ctx, cred, "v1")
	if err != nil || st.State != upstream.StateFailed || strings.Contains(st.ErrorMessage, secret) || !strings.Contains(st.ErrorMessage, "[redacted]") {
		t.Fatalf("poll %+v %v", st, err)
	}
}
