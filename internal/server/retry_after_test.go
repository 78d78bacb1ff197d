package server_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestRetryAfterIsHonoured: a provider answering a submission 429 with Retry-After (OpenAI's
// rate_limit_exceeded, as its error-code guide shows it) is not asked again sooner, although the
// worker's own backoff would retry within a fraction of a second; the task then completes.
func TestRetryAfterIsHonoured(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		oai := startSim(t, "openai", 100*time.Millisecond, 4, "key-o")
		var mu sync.Mutex
		var posts []time.Time
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				mu.Lock()
				posts = append(posts, time.Now())
				first := len(posts) == 1
				mu.Unlock()
				if first {
					w.Header().Set("Content-Type", "application/json")
					w.Header().Set("Retry-After", "3")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
					return
				}
			}
			oai.ServeHTTP(w, r)
		}))
		t.Cleanup(front.Close)
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("o", "openai", front.URL, "key-o", 4, route("videogen-2.0-720p", "sora-2", "0.1")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, nil))
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "after the rate limit"})["id"].(string)
		if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
			t.Fatalf("task: %v", v)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(posts) != 2 || posts[1].Sub(posts[0]) < 3*time.Second {
			t.Fatalf("submissions at %v: want the second no sooner than Retry-After (3 s) after the first", posts)
		}
	})
}
