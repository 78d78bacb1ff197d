package tzlist

import (
	"slices"
	"testing"
	"time"
	_ "time/tzdata"
)

// TestEveryZoneLoads: every zone offered loads, the list is sorted without repeats, and it is the whole of
// zone.tab (more than 400 zones, among them ones a short list forgets).
func TestEveryZoneLoads(t *testing.T) {
	zones := All()
	if len(zones) < 400 {
		t.Fatalf("%d zones, want every zone of zone.tab (over 400)", len(zones))
	}
	if !slices.IsSorted(zones) || len(slices.Compact(slices.Clone(zones))) != len(zones) {
		t.Error("the zones are not sorted, or repeat")
	}
	for _, z := range zones {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("%s: %v", z, err)
		}
	}
	for _, want := range []string{"Europe/Amsterdam", "Asia/Kolkata", "America/Argentina/Salta", "Pacific/Chatham", "Asia/Kathmandu"} {
		if !slices.Contains(zones, want) {
			t.Errorf("%s is not offered", want)
		}
	}
}
