package handlers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestMetrics: with METRICS_ADDR set, its own listener answers /metrics with every request counted by
// method, route pattern and the status the client got — an error a route returned is counted with the
// status it was rendered as, a refusal by a group's middleware under the group's prefix, a path no route
// knows as "unmatched", and no raw path or id ever becomes a label — and with the platform's figures read at the scrape: the queue, its oldest task's age, each
// upstream credential's in-flight tasks against its capacity. The public port answers 404 there.
func TestMetrics(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// One simulated credential with one slot and a long generation: the first task holds the slot,
		// the second waits for it.
		s := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0",
			"SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1", "SIM_DURATION": "1h"})
		acct := s.NewAccount(t, "10")
		video := map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a lighthouse at dusk"}
		first := s.CreateVideo(t, acct.Key, video)["id"].(string)
		s.CreateVideo(t, acct.Key, video)
		if r := s.Do(t, "GET", "/v1/videos/"+first, acct.Key, nil); r.Status != 200 {
			t.Fatalf("poll: %d", r.Status)
		}
		if r := s.Do(t, "GET", "/v1/videos/video_noSuchVideoAtAll0000", acct.Key, nil); r.Status != 404 {
			t.Fatalf("unknown video: %d", r.Status)
		}
		if r := s.Do(t, "GET", "/v1/models", "", nil); r.Status != 401 {
			t.Fatalf("no key: %d", r.Status)
		}
		if r := s.Do(t, "GET", "/nowhere-at-all", "", nil); r.Status != 404 {
			t.Fatalf("unknown path: %d", r.Status)
		}
		// A page route that returns its refusal as an error, rendered later in the chain.
		if r := s.Do(t, "GET", "/support", "", nil); r.Status != 404 {
			t.Fatalf("/support signed out: %d", r.Status)
		}
		if r := s.Do(t, "GET", "/metrics", "", nil); r.Status != 404 || strings.Contains(string(r.Body), "videogen_") {
			t.Fatalf("the public port answered /metrics: %d %.200s", r.Status, r.Body)
		}

		var cred models.UpstreamCredential
		if err := s.DB.R.Take(&cred).Error; err != nil {
			t.Fatal(err)
		}
		var m testkit.Samples
		var inFlight, waiting float64
		testkit.Eventually(t, 30*time.Second, "the first task takes the slot and the second waits", func() bool {
			m = s.ScrapeMetrics(t)
			inFlight, _ = m.Value("videogen_credential_in_flight", "credential", cred.ID)
			waiting, _ = m.Value("videogen_tasks_waiting_for_slot")
			return inFlight == 1 && waiting == 1
		}, func() string { return fmt.Sprintf("in flight %v, waiting %v:\n%s", inFlight, waiting, m.Text) })

		want := []struct {
			method, route, status string
			n                     float64
		}{
			{"POST", "/v1/videos", "200", 2},
			{"GET", "/v1/videos/:id", "200", 1},
			{"GET", "/v1/videos/:id", "404", 1},
			{"GET", "/v1", "401", 1}, // refused by the API's own middleware, before any endpoint
			{"GET", "/support", "404", 1},
			{"GET", "unmatched", "404", 2}, // /nowhere-at-all and the public /metrics
		}
		for _, w := range want {
			labels := []string{"method", w.method, "route", w.route, "status", w.status}
			if n, ok := m.Value("videogen_http_requests_total", labels...); !ok || n != w.n {
				t.Errorf("videogen_http_requests_total%v = %v (found %v), want %v", labels, n, ok, w.n)
			}
			if n, ok := m.Value("videogen_http_request_duration_seconds_count", labels...); !ok || n != w.n {
				t.Errorf("videogen_http_request_duration_seconds_count%v = %v (found %v), want %v", labels, n, ok, w.n)
			}
			if n, ok := m.Value("videogen_http_request_duration_seconds_bucket", append(labels, "le", "+Inf")...); !ok || n != w.n {
				t.Errorf("the latency histogram's +Inf bucket%v = %v (found %v), want %v", labels, n, ok, w.n)
			}
		}
		for _, sm := range m.List {
			for k, v := range sm.Labels {
				if strings.Contains(v, "video_") || strings.Contains(v, "nowhere") {
					t.Errorf("a raw path became a label value: %s{%s=%q}", sm.Name, k, v)
				}
			}
		}

		queued, _ := m.Value("videogen_tasks", "status", "queued")
		running, _ := m.Value("videogen_tasks", "status", "in_progress")
		if queued < 1 || queued+running != 2 {
			t.Errorf("videogen_tasks: queued %v, in_progress %v; want the waiting task queued and both counted", queued, running)
		}
		if age, ok := m.Value("videogen_queue_oldest_age_seconds"); !ok || age <= 0 {
			t.Errorf("videogen_queue_oldest_age_seconds = %v (found %v), want the waiting task's age", age, ok)
		}
		for name, want := range map[string]float64{"videogen_credential_capacity": 1, "videogen_credential_enabled": 1} {
			if v, ok := m.Value(name, "credential", cred.ID, "label", cred.Label); !ok || v != want {
				t.Errorf("%s{credential=%q} = %v (found %v), want %v", name, cred.ID, v, ok, want)
			}
		}
		if up, _ := m.Value("videogen_metrics_database_up"); up != 1 {
			t.Errorf("videogen_metrics_database_up = %v", up)
		}
		if strings.Contains(m.Text, "simkey_") {
			t.Error("a credential's secret is in the metrics")
		}
	})
}

// TestMetricsOff: without METRICS_ADDR nothing listens for metrics and the public port has no /metrics.
func TestMetricsOff(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	if s.MetricsAddr() != "" {
		t.Fatalf("a metrics listener without METRICS_ADDR: %s", s.MetricsAddr())
	}
	if r := s.Do(t, "GET", "/metrics", "", nil); r.Status != 404 {
		t.Fatalf("GET /metrics on the public port: %d", r.Status)
	}
}
