package ratelimit

import (
	"context"
	"testing"
	"time"
)

func TestPerSecond(t *testing.T) {
	for _, tc := range []struct {
		rps    float64
		events int
		per    time.Duration
	}{
		{10, 10, time.Second},
		{0.5, 5, 10 * time.Second},
		{0.25, 25, 100 * time.Second},
		{1000000, 1000000, time.Second},
	} {
		if r := PerSecond(tc.rps, 7); r.Events != tc.events || r.Per != tc.per || r.Burst != 7 {
			t.Errorf("PerSecond(%v) = %+v, want %d per %v", tc.rps, r, tc.events, tc.per)
		}
	}
}

// TestLocalBucket: the burst passes, the next request waits about one refill, other keys are untouched.
func TestLocalBucket(t *testing.T) {
	l := NewLocal(Rate{Events: 5, Per: 15 * time.Minute, Burst: 5})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if ok, _, _ := l.Allow(ctx, "a@example.com"); !ok {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
	}
	ok, wait, _ := l.Allow(ctx, "a@example.com")
	if ok || wait < 2*time.Minute || wait > 3*time.Minute+time.Second {
		t.Fatalf("6th attempt: ok=%v wait %v, want refused for ~3 min", ok, wait)
	}
	if ok, _, _ := l.Allow(ctx, "b@example.com"); !ok {
		t.Fatal("another key was limited")
	}
}
