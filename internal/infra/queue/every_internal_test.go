package queue

import (
	"testing"
	"time"
)

// TestEverySkipsMissedRuns: a periodic job's next run is an interval after the last, unless the clock
// has already passed that — a clock moved ahead, a leader woken from a pause — when it is an interval
// after now: River would otherwise insert one job for every interval missed.
func TestEverySkipsMissedRuns(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	s := skipMissed{every: time.Minute, now: func() time.Time { return now }}
	if got, want := s.Next(now.Add(-30*time.Second)), now.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("on schedule: next %s, want %s", got, want)
	}
	if got, want := s.Next(now.Add(-time.Hour)), now.Add(time.Minute); !got.Equal(want) {
		t.Errorf("an hour behind: next %s, want %s (one run now, none for the hour missed)", got, want)
	}
}
