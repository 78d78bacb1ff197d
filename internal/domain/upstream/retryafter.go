package upstream

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter bounds the wait a provider may ask for: a wrong or hostile header must not park a
// credential for longer than a day.
const maxRetryAfter = 24 * time.Hour

// ParseRetryAfter is how long a provider's answer asks us to wait before the next call, the one reading
// of it every adapter shares: OpenAI's retry-after-ms (milliseconds) first, then Retry-After in seconds
// (fractions allowed) or as an HTTP date (RFC 9110 §10.2.3). A date is measured from the answer's own
// Date header when it has one — the provider's clock against the provider's clock — else from now. Zero
// when the answer says nothing usable; at most a day.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); err == nil && ms > 0 {
		return bounded(time.Duration(min(ms, float64(maxRetryAfter/time.Millisecond)) * float64(time.Millisecond)))
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return bounded(time.Duration(min(s, maxRetryAfter.Seconds()) * float64(time.Second)))
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if sent, err := http.ParseTime(h.Get("Date")); err == nil {
		now = sent
	}
	if !at.After(now) {
		return 0
	}
	return bounded(at.Sub(now))
}

func bounded(d time.Duration) time.Duration { return min(max(d, 0), maxRetryAfter) }
