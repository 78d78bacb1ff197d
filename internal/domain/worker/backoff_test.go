package worker

import (
	"testing"
	"time"
)

// TestBackoffGrows: polls of one task come further apart each time, up to the maximum.
func TestBackoffGrows(t *testing.T) {
	minD, maxD := time.Second, 30*time.Second
	for _, tc := range []struct {
		n    int
		want time.Duration
	}{
		{0, time.Second}, {1, 1500 * time.Millisecond}, {2, 2250 * time.Millisecond}, {5, 7593750 * time.Microsecond},
		{8, 25628906250}, {9, 30 * time.Second}, {1000, 30 * time.Second},
	} {
		if got := backoff(minD, maxD, tc.n, 1.5); got != tc.want {
			t.Errorf("backoff(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	prev := time.Duration(0)
	for n := 0; n < 50; n++ {
		d := backoff(minD, maxD, n, 1.5)
		if d < prev || d > maxD {
			t.Fatalf("backoff(%d) = %v after %v", n, d, prev)
		}
		prev = d
	}
}
