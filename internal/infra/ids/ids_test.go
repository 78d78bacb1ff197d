package ids

import (
	"slices"
	"strings"
	"testing"
	"time"
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

// TestRequestIDsInTimeOrder: a request id is "req_" and 20 characters of the alphabet, and ids made in a
// later microsecond sort after earlier ones as bytes — as the call log's index on request_id sorts them —
// across the carries of base 62 and up to the format's last year; ids of one microsecond still differ.
func TestRequestIDsInTimeOrder(t *testing.T) {
	at := []time.Time{
		time.Unix(0, 0),
		time.Unix(0, 61_000), time.Unix(0, 62_000), // the last digit carries
		time.Date(2026, 11, 26, 17, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 26, 17, 0, 0, 1_000, time.UTC),
		time.Date(2026, 11, 26, 17, 0, 1, 0, time.UTC),
		time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2398, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	var made []string
	for _, a := range at {
		id := string(appendTime([]byte("req_"), a)) + random(RequestIDLen-4-requestTimeLen)
		if len(id) != RequestIDLen || strings.Trim(id[4:], alphabet) != "" {
			t.Fatalf("request id %q at %v", id, a)
		}
		made = append(made, id)
	}
	if !slices.IsSorted(made) {
		t.Fatalf("request ids out of time order: %q", made)
	}

	// Made one after another, their time parts never go down (within one microsecond the random rest
	// decides), and no two are the same.
	seen := map[string]bool{}
	last := ""
	for range 1000 {
		id := NewRequestID()
		if seen[id] {
			t.Fatalf("request id %q made twice", id)
		}
		seen[id] = true
		if at := id[:4+requestTimeLen]; at < last {
			t.Fatalf("request id %q made after one of time %q", id, last)
		} else {
			last = at
		}
	}
	if id := NewRequestID(); !strings.HasPrefix(id, string(appendTime([]byte("req_"), time.Now()))[:4+5]) {
		t.Fatalf("request id %q does not start with the time", id)
	}
}
