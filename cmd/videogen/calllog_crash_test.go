package main_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestCallLogSurvivesACrash: SIGKILL under a load of polls and creates; every request whose answer
// arrived has its call-log row, creates (which move money) included. The call log is group-committed: no
// answer leaves before its row is committed (docs/decisions.md, "The call log is group-committed").
func TestCallLogSurvivesACrash(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		// No worker: the tasks stay queued and the load is the API's alone. No limit on queued tasks.
		env := map[string]string{"DATABASE_URL": dbURL, "WORKERS": "false", "RATE_LIMIT_RPS": "100000", "RATE_LIMIT_BURST": "100000",
			"MAX_QUEUED_PER_ACCOUNT": "1000000", "LOG_LEVEL": "error"}
		p := serve(t, dir, env)
		d := testkit.OpenDB(t, dbURL)
		acct := testkit.NewAccount(t, d, "100000")
		create := []byte(`{"model":"videogen-2.0-mini-480p","prompt":"a lighthouse at dusk"}`)
		first := testkit.Do(t, p.url, "POST", "/v1/videos", acct.Key, create)
		if first.Status != 200 {
			t.Fatalf("create: %d %s", first.Status, first.Body)
		}
		poll := "/v1/videos/" + first.JSON(t)["id"].(string)

		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		var mu sync.Mutex
		answered := map[string]string{} // request id → what it was
		var polls, creates atomic.Int64
		send := func(method, path string, body []byte) bool {
			req, err := http.NewRequest(method, p.url+path, bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return false
			}
			req.Header.Set("Authorization", "Bearer "+acct.Key)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := client.Do(req)
			if err != nil {
				return false // cut by the crash: not answered
			}
			// The answer arrived: its headers, with the request id, are here.
			id := resp.Header.Get("X-Request-Id")
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			answered[id] = fmt.Sprintf("%s %s → %d", method, path, resp.StatusCode)
			mu.Unlock()
			if method == "POST" && resp.StatusCode != 200 {
				t.Errorf("create answered %d", resp.StatusCode)
			}
			return true
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if i%3 == 0 {
						if !send("POST", "/v1/videos", create) {
							return
						}
						creates.Add(1)
					} else {
						if !send("GET", poll, nil) {
							return
						}
						polls.Add(1)
					}
				}
			})
		}
		// Under load for a moment — enough answers of each kind that some are certainly in flight — then
		// killed.
		testkit.Eventually(t, 60*time.Second, "answers under load", func() bool { return polls.Load() >= 400 && creates.Load() >= 60 },
			func() string {
				return fmt.Sprintf("%d polls, %d creates\n%s", polls.Load(), creates.Load(), p.stderr.String())
			})
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		close(stop)
		wg.Wait()

		mu.Lock()
		defer mu.Unlock()
		var logged []string
		if err := d.R.Model(&models.CallLog{}).Pluck("request_id", &logged).Error; err != nil {
			t.Fatal(err)
		}
		inLog := map[string]bool{}
		for _, id := range logged {
			inLog[id] = true
		}
		missing := 0
		for id, what := range answered {
			if !inLog[id] {
				missing++
				if missing <= 10 {
					t.Errorf("answered %s (request %s), not in the call log", what, id)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("%d of %d answered requests missing from the call log after SIGKILL", missing, len(answered))
		}
		// Every create answered 200 reserved money: its row names the task and the amount.
		var createRows int64
		d.R.Model(&models.CallLog{}).Where("method = 'POST' AND status = 200 AND amount_reserved_micros > 0 AND task_id <> ''").Count(&createRows)
		if createRows < creates.Load()+1 {
			t.Fatalf("%d create rows with their task and amount, want at least %d", createRows, creates.Load()+1)
		}
		t.Logf("%d answers (%d polls, %d creates) before SIGKILL, all in the call log (%d rows)", len(answered), polls.Load(), creates.Load(), len(logged))
	})
}
