package handlers_test

import (
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

func TestCallLogRecordsEveryRequest(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1.50")
		created := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "logged", "seconds": 5})
		id := created.JSON(t)["id"].(string)
		got := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil)
		broke := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "too dear"})
		anon := s.Do(t, "GET", "/v1/models", "", nil)
		bad := s.Do(t, "POST", "/v1/videos", acct.Key, `{"model":`)
		health := s.Do(t, "GET", "/healthz", "", nil)
		_ = health

		want := map[string]struct {
			status           int
			code, path, task string
			amount           int64
			withAccount      bool
			method           string
		}{
			created.Header.Get("X-Request-Id"): {200, "", "/v1/videos", id, 1_500_000, true, "POST"},
			got.Header.Get("X-Request-Id"):     {200, "", "/v1/videos/" + id, id, 0, true, "GET"},
			broke.Header.Get("X-Request-Id"):   {402, "insufficient_balance", "/v1/videos", "", 0, true, "POST"},
			anon.Header.Get("X-Request-Id"):    {401, "missing_api_key", "/v1/models", "", 0, false, "GET"},
			bad.Header.Get("X-Request-Id"):     {400, "invalid_json", "/v1/videos", "", 0, true, "POST"},
		}
		var rows []models.CallLog
		deadline := time.Now().Add(5 * time.Second)
		for {
			rows = nil
			s.DB.R.Order("id").Find(&rows)
			if len(rows) >= len(want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(rows) != len(want) {
			t.Fatalf("%d call-log rows, want %d (health checks are not API calls)", len(rows), len(want))
		}
		for _, r := range rows {
			w, ok := want[r.RequestID]
			if !ok {
				t.Fatalf("unexpected row %+v", r)
			}
			if r.Status != w.status || r.ErrorCode != w.code || r.Path != w.path || r.TaskID != w.task || r.AmountReservedMicros != w.amount || r.Method != w.method {
				t.Errorf("row %+v, want %+v", r, w)
			}
			if w.withAccount != (r.AccountID != nil) || (w.withAccount && (*r.AccountID != acct.ID || r.KeyPrefix != acct.Key[:11])) {
				t.Errorf("row %s: account %v prefix %q", r.RequestID, r.AccountID, r.KeyPrefix)
			}
			if r.LatencyMicros <= 0 || time.Since(r.At) > time.Minute {
				t.Errorf("row %s: latency %d at %v", r.RequestID, r.LatencyMicros, r.At)
			}
		}
	})
}
