package handlers_test

import (
	"strings"
	"testing"

	"videogen/internal/testkit"
)

// TestStrictTransportSecurity: with an https PUBLIC_BASE_URL every answer — pages, the API, static files,
// refusals, even those made before any route ran — tells browsers to use HTTPS only, and none lets a
// browser sniff; over plain http nothing claims HTTPS.
func TestStrictTransportSecurity(t *testing.T) {
	secure := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "PUBLIC_BASE_URL": "https://videogen.example"})
	plain := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	big := strings.Repeat("x", 2<<20)
	huge := strings.Repeat("k", 8000)
	for _, tc := range []struct {
		name, method, path, key string
		body                    any
		status                  int
	}{
		{"home", "GET", "/", "", nil, 200},
		{"sign-in page", "GET", "/signin", "", nil, 200},
		{"API refusal", "GET", "/v1/models", "", nil, 401},
		{"static file", "GET", "/static/app.css", "", nil, 200},
		{"unknown page", "GET", "/no-such-page", "", nil, 404},
		{"health", "GET", "/healthz", "", nil, 200},
		{"form body over 1 MiB", "POST", "/signin", "", big, 413},
		{"header over the buffer", "GET", "/", huge, nil, 431},
	} {
		for _, site := range []struct {
			s    *testkit.Server
			want string
		}{{secure, "max-age=31536000"}, {plain, ""}} {
			r := site.s.Do(t, tc.method, tc.path, tc.key, tc.body)
			if r.Status != tc.status {
				t.Fatalf("%s: status %d, want %d", tc.name, r.Status, tc.status)
			}
			if got := r.Header.Get("Strict-Transport-Security"); got != site.want {
				t.Errorf("%s on %s: Strict-Transport-Security %q, want %q", tc.name, site.s.Cfg.PublicBaseURL, got, site.want)
			}
			if r.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s on %s: no nosniff", tc.name, site.s.Cfg.PublicBaseURL)
			}
		}
	}
}
