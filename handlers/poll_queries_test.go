package handlers_test

import (
	"testing"

	"videogen/internal/testkit"
)

// TestPollQueries: the poll runs the fewest database statements its answer allows (docs/performance.md,
// "The poll path does the least"). Answered from the caches it runs none — not for its key, its rate
// limit or its task; with the poll cache off (POLL_CACHE_TTL=0) exactly one, its task's row. The call
// log's row is written apart and is not counted. The count is the server's own,
// videogen_http_database_queries_total, which counts each request's statements by its context, so what
// background work runs meanwhile cannot disturb it.
func TestPollQueries(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// Caches long enough that none expires during the test, on a loaded machine too.
		cached := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "WORKERS": "false",
			"POLL_CACHE_TTL": "1h", "API_KEY_CACHE_TTL": "1h"})
		uncached := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "WORKERS": "false",
			"POLL_CACHE_TTL": "0", "API_KEY_CACHE_TTL": "1h"})
		acct := cached.NewAccount(t, "10")
		id := cached.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a quiet harbour"})["id"].(string)

		queries := func(s *testkit.Server) float64 {
			t.Helper()
			// No series before the route's first request: 0.
			n, _ := s.ScrapeMetrics(t).Value("videogen_http_database_queries_total", "method", "GET", "route", "/v1/videos/:id")
			return n
		}
		polls := func(s *testkit.Server, n int) float64 {
			t.Helper()
			before := queries(s)
			for range n {
				if r := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil); r.Status != 200 {
					t.Fatalf("poll: %d %s", r.Status, r.Body)
				}
			}
			return queries(s) - before
		}
		// The first poll of an instance that has not seen the key reads the key and the task; on the
		// caching instance the create has read the key already.
		if n := polls(uncached, 1); n != 2 {
			t.Fatalf("first poll: %v statements, want 2 (the key, the task)", n)
		}
		if n := polls(cached, 1); n != 1 {
			t.Fatalf("first poll after the create: %v statements, want 1 (the task)", n)
		}
		const n = 20
		if q := polls(cached, n); q != 0 {
			t.Errorf("%d polls answered from the caches ran %v statements, want none", n, q)
		}
		if q := polls(uncached, n); q != n {
			t.Errorf("%d polls with the poll cache off ran %v statements, want %d (the task's row each)", n, q, n)
		}
	})
}
