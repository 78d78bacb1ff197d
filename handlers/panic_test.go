package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"videogen/billing"
	"videogen/handlers"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/calllog"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ratelimit"
	"videogen/internal/testkit"
)

func openMigrated(t *testing.T) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), testkit.SQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := billing.SeedPrices(context.Background(), d, time.Now()); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPanicIsInternalError wires the app with a missing dependency so the create handler panics: the
// client gets a 500 internal_error carrying the request id, and nothing of the panic or its stack.
func TestPanicIsInternalError(t *testing.T) {
	d := openMigrated(t)
	acct := testkit.NewAccount(t, d, "10")
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	cl := calllog.NewWriter(d, log)
	go func() { _ = cl.Run(context.Background()) }()
	defer cl.Close(context.Background())
	app := handlers.New(handlers.Deps{DB: d, Log: log, Now: time.Now, Keys: apikeys.NewAuthenticator(d, 0, time.Now), Limiter: ratelimit.NewLocal(ratelimit.PerSecond(100, 100)),
		CallLog: cl, Prices: billing.NewPrices(d) /* Videos deliberately missing */})

	req := httptest.NewRequest("POST", "/v1/videos", strings.NewReader(`{"model":"videogen-2.0-720p","prompt":"boom"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+acct.Key)
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body %q", body)
	}
	rid := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 500 || e.Error["code"] != "internal_error" || rid == "" || e.Error["request_id"] != rid {
		t.Fatalf("status %d body %s request id %q", resp.StatusCode, body, rid)
	}
	for _, leak := range []string{"goroutine", "runtime error", "nil pointer", ".go:", acct.Key} {
		if strings.Contains(string(body), leak) {
			t.Fatalf("response leaks %q: %s", leak, body)
		}
	}
	if !strings.Contains(logs.String(), rid) || strings.Contains(logs.String(), acct.Key) {
		t.Fatalf("the log should name the request id and never the key: %s", logs.String())
	}
}

func TestHealthAndReadiness(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	if r := s.Do(t, "GET", "/healthz", "", nil); r.Status != 200 || r.JSON(t)["status"] != "ok" {
		t.Fatalf("healthz %d %s", r.Status, r.Body)
	}
	if r := s.Do(t, "GET", "/readyz", "", nil); r.Status != 200 || r.JSON(t)["status"] != "ready" {
		t.Fatalf("readyz %d %s", r.Status, r.Body)
	}

	// A database whose migrations have not run is not ready.
	fresh, err := db.Open(context.Background(), testkit.EmptySQLiteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	app := handlers.New(handlers.Deps{DB: fresh, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	resp, err := app.Test(httptest.NewRequest("GET", "/readyz", nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "migrations pending") {
		t.Fatalf("readyz on an unmigrated database: %d %s", resp.StatusCode, body)
	}
	// And a closed one is not either.
	_ = fresh.Close()
	resp, _ = app.Test(httptest.NewRequest("GET", "/readyz", nil), -1)
	if resp.StatusCode != 503 {
		t.Fatalf("readyz with the database closed: %d", resp.StatusCode)
	}
	resp, _ = app.Test(httptest.NewRequest("GET", "/healthz", nil), -1)
	if resp.StatusCode != 200 {
		t.Fatalf("healthz answers while the process runs: %d", resp.StatusCode)
	}
}
