package client

import (
	"testing"
	"time"
)

// TestPollAfterBounds: openai-poll-after-ms is followed within 0.1–30 s; a missing or unreadable header
// waits 1 s, and a value too large for any integer is capped rather than wrapped to a negative wait
// (which would poll without pause). The cap cannot be shown through Wait without waiting 30 s.
func TestPollAfterBounds(t *testing.T) {
	for h, want := range map[string]time.Duration{
		"300":                      300 * time.Millisecond,
		" 1500 ":                   1500 * time.Millisecond,
		"15000":                    15 * time.Second,
		"":                         time.Second,
		"1.5":                      time.Second,
		"soon":                     time.Second,
		"0":                        100 * time.Millisecond,
		"-20":                      100 * time.Millisecond,
		"30001":                    30 * time.Second,
		"86400000":                 30 * time.Second,
		"9223372036854775":         30 * time.Second, // overflows time.Duration once multiplied by 1 ms
		"99999999999999999999":     30 * time.Second, // beyond int64
		"-99999999999999999999999": 100 * time.Millisecond,
	} {
		if got := pollAfter(h); got != want {
			t.Errorf("pollAfter(%q) = %v, want %v", h, got, want)
		}
	}
}
