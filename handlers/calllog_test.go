package handlers_test

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
		s.Do(t, "GET", "/healthz", "", nil)
		huge := postOversized(t, s.URL, acct.Key, false)

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
			// Refused by the server before the request reached any handler: no account is known yet.
			huge.Header.Get("X-Request-Id"): {413, "request_too_large", "/v1/videos", "", 0, false, "POST"},
		}
		rows := callLogRows(t, s, len(want))
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
			if r.At.Nanosecond()%1000 != 0 {
				t.Errorf("row %s: time %v is finer than the database keeps, so page cursors would skip rows", r.RequestID, r.At)
			}
			if r.LatencyMicros <= 0 || time.Since(r.At) > time.Minute {
				t.Errorf("row %s: latency %d at %v", r.RequestID, r.LatencyMicros, r.At)
			}
		}
	})
}

// TestCallLogSurvivesHostileInput: a request line with bytes that are not UTF-8 (which PostgreSQL would
// refuse to store) is logged cleaned, and does not cost the rows written beside it.
func TestCallLogSurvivesHostileInput(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1")
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("GET /v1/videos/video_\xff\xfe HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + acct.Key + "\r\nConnection: close\r\n\r\n"))
		reply, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(reply), "HTTP/1.1 404") {
			t.Fatalf("reply %q", reply)
		}
		ok := s.Do(t, "GET", "/v1/models", acct.Key, nil)
		rows := callLogRows(t, s, 2)
		if len(rows) != 2 || rows[1].RequestID != ok.Header.Get("X-Request-Id") || !utf8.ValidString(rows[0].Path) || rows[0].Status != 404 {
			t.Fatalf("call log rows %+v", rows)
		}
	})
}

// TestCallLogRecordsCutRequests: a client that goes away before its body has arrived still leaves a
// call-log row for the request, with the status it ended with — whether the server was still reading
// the headers' announced body (a small JSON body fasthttp reads before any route runs), or a route was
// streaming it (an upload).
func TestCallLogRecordsCutRequests(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		key := s.NewAccount(t, "10").Key
		// cut sends a request's head and part of its body, goes away, and waits for the request's row, so
		// the rows come in the order of the requests. What was written reaches the server before the
		// close does (a FIN, behind the data), so the server always reads the head and the partial body
		// and then finds the client gone, however late it gets to them.
		cuts := 0
		cut := func(path, ctype string, length int, body string) {
			t.Helper()
			conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = conn.Write([]byte("POST " + path + "?x=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\nContent-Type: " + ctype +
				"\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n" + body))
			conn.Close()
			cuts++
			callLogRows(t, s, cuts)
		}
		part := "--b\r\nContent-Disposition: form-data; name=\"image_files\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n\x1a\n"
		cut("/v1/videos", "application/json", 1000, `{"model":`)
		cut("/uploads/v1/import", "application/json", 1000, "")
		cut("/uploads/v1/files", "multipart/form-data; boundary=b", 10<<20, "")
		cut("/uploads/v1/files", "multipart/form-data; boundary=b", 10<<20, part+strings.Repeat("a", 64<<10))
		want := []string{"POST /v1/videos", "POST /uploads/v1/import", "POST /uploads/v1/files", "POST /uploads/v1/files"}
		rows := callLogRows(t, s, len(want))
		if len(rows) != len(want) {
			t.Fatalf("%d call-log rows for %d cut requests: %+v", len(rows), len(want), rows)
		}
		for i, r := range rows {
			if got := r.Method + " " + r.Path; got != want[i] || r.Status != 400 || r.RequestID == "" {
				t.Errorf("row %d: %s status %d code %q, want %s with status 400", i, got, r.Status, r.ErrorCode, want[i])
			}
			// A real duration, never a time measured from zero.
			if r.LatencyMicros <= 0 || r.LatencyMicros > 30_000_000 || time.Since(r.At) > time.Minute {
				t.Errorf("row %d: latency %d µs at %v", i, r.LatencyMicros, r.At)
			}
		}
	})
}

// callLogRows waits until the call log (written in batches, a moment after each answer) holds at least n
// rows, and returns them all, oldest first.
func callLogRows(t *testing.T, s *testkit.Server, n int) []models.CallLog {
	t.Helper()
	var rows []models.CallLog
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d call-log rows", n), func() bool {
		rows = nil
		s.DB.R.Order("id").Find(&rows)
		return len(rows) >= n
	}, func() string { return fmt.Sprintf("%d rows: %+v", len(rows), rows) })
	return rows
}

// TestCreateCommitsItsCallRowWithTheMoney: a create that reserves money writes its call-log row in its
// own transaction — on PostgreSQL the task's row and the call's carry the same transaction id (xmin) — and
// not through the call-log writer; a replayed create and a refused one, which reserve nothing, are
// written by the writer as every other request is. Each row says what the answer said.
func TestCreateCommitsItsCallRowWithTheMoney(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1.50")
		body := map[string]any{"model": "videogen-2.0-480p", "prompt": "committed with its money", "seconds": 4}
		before := s.CallLog.Stats().Rows
		first := s.Do(t, "POST", "/v1/videos", acct.Key, body, "Idempotency-Key", "k-1")
		second := s.Do(t, "POST", "/v1/videos", acct.Key, body)
		replay := s.Do(t, "POST", "/v1/videos", acct.Key, body, "Idempotency-Key", "k-1")
		refused := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "too dear", "seconds": 12})
		for _, r := range []*testkit.Resp{first, second, replay} {
			if r.Status != 200 {
				t.Fatalf("create: %d %s", r.Status, r.Body)
			}
		}
		if refused.Status != 402 {
			t.Fatalf("create beyond the balance: %d %s", refused.Status, refused.Body)
		}
		// Each answer left after its row committed: the writer's count is final now.
		if n := s.CallLog.Stats().Rows - before; n != 2 {
			t.Errorf("the call-log writer committed %d rows, want 2 (the replay and the refusal; the creates wrote their own)", n)
		}

		rows := callLogRows(t, s, 4)
		byID := map[string]models.CallLog{}
		for _, r := range rows {
			byID[r.RequestID] = r
		}
		for _, c := range []struct {
			name   string
			resp   *testkit.Resp
			status int
			amount int64
			task   string
		}{
			{"first create", first, 200, 600_000, first.JSON(t)["id"].(string)},
			{"second create", second, 200, 600_000, second.JSON(t)["id"].(string)},
			{"replay", replay, 200, 0, first.JSON(t)["id"].(string)},
			{"refusal", refused, 402, 0, ""},
		} {
			r, ok := byID[c.resp.Header.Get("X-Request-Id")]
			switch {
			case !ok:
				t.Errorf("%s: no call-log row for %s", c.name, c.resp.Header.Get("X-Request-Id"))
			case r.Status != c.status || r.AmountReservedMicros != c.amount || r.TaskID != c.task || r.Method != "POST" || r.Path != "/v1/videos":
				t.Errorf("%s: row %+v, want status %d, amount %d, task %q", c.name, r, c.status, c.amount, c.task)
			case r.AccountID == nil || *r.AccountID != acct.ID || r.KeyPrefix != acct.Key[:11] || r.BytesIn <= 0:
				t.Errorf("%s: row %+v, want account %d, key %s, its body's bytes", c.name, r, acct.ID, acct.Key[:11])
			case r.LatencyMicros <= 0 || time.Since(r.At) > time.Minute || r.At.Nanosecond()%1000 != 0:
				t.Errorf("%s: latency %d at %v", c.name, r.LatencyMicros, r.At)
			}
		}

		if s.DB.Postgres {
			var together int
			if err := s.DB.R.Raw(`SELECT count(*) FROM tasks t JOIN call_logs c ON c.task_id = t.id AND c.status = 200 AND c.amount_reserved_micros > 0
				WHERE t.xmin = c.xmin`).Scan(&together).Error; err != nil {
				t.Fatal(err)
			}
			if together != 2 {
				t.Errorf("%d creates committed their call-log row in their own transaction, want 2", together)
			}
		}
	})
}
