package upstream_test

import (
	"net/http"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
)

// TestParseRetryAfter: the forms the three providers send (OpenAI's retry-after-ms and seconds, Google's
// seconds, Ark's seconds or an HTTP date), measured against the answer's Date when it has one.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	for _, c := range []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"nothing", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds first", map[string]string{"Retry-After-Ms": "250", "Retry-After": "7"}, 250 * time.Millisecond},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"a date from now", map[string]string{"Retry-After": date(now.Add(90 * time.Second))}, 90 * time.Second},
		{"a date from the answer's Date", map[string]string{"Retry-After": date(now.Add(time.Hour)), "Date": date(now.Add(59 * time.Minute))}, time.Minute},
		{"a date past", map[string]string{"Retry-After": date(now.Add(-time.Minute))}, 0},
		{"a week, bounded to a day", map[string]string{"Retry-After": "604800"}, 24 * time.Hour},
		{"huge milliseconds, bounded", map[string]string{"Retry-After-Ms": "1e300"}, 24 * time.Hour},
	} {
		h := http.Header{}
		for k, v := range c.h {
			h.Set(k, v)
		}
		if got := upstream.ParseRetryAfter(h, now); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// FuzzParseRetryAfter: no header makes it panic or answer outside [0, a day].
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"7", "1.5", "Sun, 06 Nov 1994 08:49:37 GMT", "-1", "NaN", "Inf", "1e309", ""} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, ra, ms string) {
		h := http.Header{}
		h.Set("Retry-After", ra)
		h.Set("Retry-After-Ms", ms)
		if d := upstream.ParseRetryAfter(h, time.Unix(1e9, 0)); d < 0 || d > 24*time.Hour {
			t.Fatalf("Retry-After %q, -Ms %q: %s", ra, ms, d)
		}
	})
}
