package main_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestAccessLog: `make run`'s server (LOG_LEVEL info) writes one line per request with method, path,
// status, latency, request id and the key's prefix — and never the key itself or a query string that
// holds a signature.
func TestAccessLog(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	run(t, dir, env, "accounts", "create", "--email", "logs@example.com")
	key, _, _ := run(t, dir, env, "keys", "create", "--email", "logs@example.com")
	key = strings.TrimSpace(key)
	p := serve(t, dir, env)
	models := testkit.Do(t, p.url, "GET", "/v1/models", key, nil)
	media := testkit.Do(t, p.url, "GET", "/media/file_abcdefghijklmnopqrstuvwx?exp=9999999999&sig=SIGNATURE_NOT_FOR_LOGS", "", nil)
	page := testkit.Do(t, p.url, "GET", "/verify?token=TOKEN_NOT_FOR_LOGS", "", nil)
	huge := testkit.Do(t, p.url, "GET", "/v1/models", strings.Repeat("k", 8000), nil)
	if models.Status != 200 || media.Status != 404 || huge.Status != 431 {
		t.Fatalf("statuses %d, %d, %d", models.Status, media.Status, huge.Status)
	}
	line := func(rid string) string {
		t.Helper()
		var found string
		testkit.Eventually(t, 10*time.Second, "an access-log line for "+rid, func() bool {
			for _, l := range strings.Split(p.stderr.String(), "\n") {
				if strings.Contains(l, "request_id="+rid) && strings.Contains(l, "msg=request") {
					found = l
					return true
				}
			}
			return false
		}, func() string { return p.stderr.String() })
		return found
	}
	prefix := key[:11]
	l := line(models.Header.Get("X-Request-Id"))
	for _, want := range []string{"level=INFO", "method=GET", "path=/v1/models", "status=200", "key=" + prefix} {
		if !strings.Contains(l, want) {
			t.Errorf("access line %q lacks %q", l, want)
		}
	}
	if !regexp.MustCompile(`latency=[0-9.]+(µs|ms|s)`).MatchString(l) {
		t.Errorf("access line %q has no latency", l)
	}
	if l := line(media.Header.Get("X-Request-Id")); !strings.Contains(l, "path=/media/file_abcdefghijklmnopqrstuvwx") || !strings.Contains(l, "status=404") {
		t.Errorf("media line %q", l)
	}
	line(page.Header.Get("X-Request-Id"))
	// Refused while its headers were read: nothing is known of where it went or since when, and nothing
	// is made up.
	if l := line(huge.Header.Get("X-Request-Id")); !strings.Contains(l, "status=431") || !strings.Contains(l, "method=- path=-") || strings.Contains(l, "latency=") {
		t.Errorf("refused request's line %q", l)
	}
	logged := p.stderr.String()
	for _, secret := range []string{key, "SIGNATURE_NOT_FOR_LOGS", "sig=", "TOKEN_NOT_FOR_LOGS", "kkkkkkkkkk"} {
		if strings.Contains(logged, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}
