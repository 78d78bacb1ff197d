// Package lrucache trims an LRU cache of entries that can no longer be served, as it is used: the
// caches of this service judge an entry's age when they read it, so a stale entry is only memory, and
// trimming on use keeps that memory to what was used recently without a goroutine that sweeps for the
// life of the process (golang-lru's expirable LRU starts one that can never be stopped).
package lrucache

import lru "github.com/hashicorp/golang-lru/v2"

// trimPerUse is how many stale entries one use may drop: more than one, so a cache shrinks faster than
// it grows once it is mostly stale, and few, so no use pays for a long sweep.
const trimPerUse = 2

// DropStale removes up to two least recently used entries that stale says can no longer be served,
// stopping at the first that still can (the entries behind it were used more recently).
func DropStale[K comparable, V any](c *lru.Cache[K, V], stale func(V) bool) {
	for range trimPerUse {
		k, v, ok := c.GetOldest()
		if !ok || !stale(v) {
			return
		}
		// Another use may have put a fresh value under k since: dropping it costs one miss.
		c.Remove(k)
	}
}
