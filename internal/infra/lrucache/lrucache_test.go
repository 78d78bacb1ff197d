package lrucache_test

import (
	"slices"
	"testing"

	lru "github.com/hashicorp/golang-lru/v2"

	"videogen/internal/infra/lrucache"
)

// TestDropStale: the least recently used entries go while they are stale, at most two a use, and never
// one used more recently than a fresh one.
func TestDropStale(t *testing.T) {
	cases := []struct {
		name  string
		ages  []int // oldest first: the value is the entry's age, stale from 10
		touch int   // an entry used again before the trim (-1: none)
		want  []int
	}{
		{"empty", nil, -1, nil},
		{"all fresh", []int{1, 2, 3}, -1, []int{1, 2, 3}},
		{"two stale at the back go", []int{30, 20, 1}, -1, []int{1}},
		{"at most two a use", []int{30, 20, 15, 1}, -1, []int{15, 1}},
		{"stops at the first fresh one", []int{30, 1, 20}, -1, []int{1, 20}},
		{"a stale entry used again is not at the back", []int{30, 1, 2}, 30, []int{1, 2, 30}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cache, err := lru.New[int, int](10)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range c.ages {
				cache.Add(a, a)
			}
			if c.touch >= 0 {
				cache.Get(c.touch)
			}
			lrucache.DropStale(cache, func(age int) bool { return age >= 10 })
			if got := cache.Keys(); !slices.Equal(got, c.want) {
				t.Fatalf("left %v, want %v", got, c.want)
			}
		})
	}
}
