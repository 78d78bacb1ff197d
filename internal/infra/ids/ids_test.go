package ids

import (
	"strings"
	"testing"
)

// TestRandomIDs: ids of every length are drawn from the alphabet, whatever their length against the
// draw buffer, and do not repeat.
func TestRandomIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range []int{1, 20, 24, 40, 43, 64, 100} {
		for range 200 {
			s := random(n)
			if len(s) != n || strings.Trim(s, alphabet) != "" {
				t.Fatalf("random(%d) = %q", n, s)
			}
			if n >= 20 && seen[s] {
				t.Fatalf("random(%d) repeated %q", n, s)
			}
			seen[s] = true
		}
	}
	id := NewRequestID()
	if len(id) != RequestIDLen || !strings.HasPrefix(id, "req_") || strings.Trim(id[4:], alphabet) != "" {
		t.Fatalf("request id %q", id)
	}
}

// TestAppendRequestIDAllocatesNothing: a request's id goes into its header without an allocation.
