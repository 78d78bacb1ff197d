package handlers_test

import (
	"testing"

	"videogen/internal/testkit"
)

// TestStrictTransportSecurity: with an https PUBLIC_BASE_URL every answer — pages, the API, static files,
// refusals — tells browsers to use HTTPS only; over plain http nothing claims it.
func TestStrictTransportSecurity(t *testing.T) {
	secure := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "PUBLIC_BASE_URL": "https://videogen.example"})
	plain := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	for _, path := range []string{"/", "/signin", "/v1/models", "/static/app.css", "/no-such-page", "/healthz"} {
		if got := secure.Do(t, "GET", path, "", nil).Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
			t.Errorf("https site, %s: Strict-Transport-Security %q", path, got)
		}
		if got := plain.Do(t, "GET", path, "", nil).Header.Get("Strict-Transport-Security"); got != "" {
			t.Errorf("http site, %s: Strict-Transport-Security %q", path, got)
		}
	}
}
