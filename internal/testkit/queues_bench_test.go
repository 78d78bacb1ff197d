package testkit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/webhooks"
	"videogen/internal/infra/mail"
	"videogen/internal/server"
	"videogen/internal/testkit"
)

// BenchmarkQueues measures the queued work end to end on one instance: e-mails per second to a local
// Resend stand-in (resend-go's POST /emails, answered at once) and webhook deliveries per second to a
// local receiver (answering 200 at once): b.N items are queued by eight writers, one transaction per
// item, as requests queue them; the rate is from the first received to the last, and ms-to-first how
// long the first took from the start of queueing (a queue that polls waits up to its interval). Production's settings, not the
// tests' fast ones (JOBS_POLL_INTERVAL 1s). The webhook events are spread over 25 accounts of two
// endpoints each, so each account's share of the attempts (docs/webhooks.md) is not what is measured.
//
// It uses only what the tree before River had too: `make bench` runs this same file there and here, in
// the same run (cmd/videogen-bench, queues.go). Run with -benchtime=Nx: each run starts its own server.
func BenchmarkQueues(b *testing.B) {
	engines := []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testkit.SQLiteURL}, {"postgres", testkit.PostgresURL}}
	for _, e := range engines {
		b.Run("mail/"+e.name, func(b *testing.B) { benchMail(b, e.url(b)) })
		b.Run("webhooks/"+e.name, func(b *testing.B) { benchWebhooks(b, e.url(b)) })
	}
}

// benchEnv is production's pace for the queues; the rest is the tests' (an instant simulator).
var benchEnv = map[string]string{"JOBS_POLL_INTERVAL": "1s", "LOG_LEVEL": "error"}

func benchMail(b *testing.B, dbURL string) {
	got := newCounter(b.N)
	resend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/emails" {
			http.NotFound(w, r)
			return
		}
		n := got.add()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"49a3999c-0ce1-4ea6-ab68-%012d"}`, n)
	}))
	defer resend.Close()
	sender, err := mail.NewResend("re_bench", "videogen <bench@example.com>", resend.URL)
	if err != nil {
		b.Fatal(err)
	}
	s := testkit.StartWith(b, dbURL, benchEnv, server.Options{Mail: sender})
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	inParallel(b, 8, b.N, func(i int) error {
		return s.DB.Tx(ctx, func(tx *gorm.DB) error {
			return s.Outbox.Enqueue(tx, mail.Message{To: fmt.Sprintf("reader%d@example.com", i), Subject: "Your video is ready",
				Text: "It is ready.", IdempotencyKey: fmt.Sprintf("bench/%d", i)})
		})
	})
	got.wait(b, start, "mails/s")
}

func benchWebhooks(b *testing.B, dbURL string) {
	got := newCounter(b.N)
	policy := testkit.ServeHTTPSHost(b, "hooks.example.com", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.add()
	}))
	s := testkit.StartWith(b, dbURL, benchEnv, server.Options{ImportPolicy: &policy})
	ctx := context.Background()
	type target struct {
		account  int64
		endpoint string
	}
	var targets []target
	for a := range 25 {
		acct := s.NewAccount(b, "1")
		for e := range 2 {
			ep, _, err := s.Webhooks.Add(ctx, acct.ID, fmt.Sprintf("https://hooks.example.com/%d/%d", a, e), []string{webhooks.VideoCompleted})
			if err != nil {
				b.Fatal(err)
			}
			targets = append(targets, target{acct.ID, ep.ID})
		}
	}
	b.ResetTimer()
	start := time.Now()
	inParallel(b, 8, b.N, func(i int) error {
		t := targets[i%len(targets)]
		return s.Webhooks.SendTest(ctx, t.account, t.endpoint, webhooks.VideoCompleted)
	})
	got.wait(b, start, "deliveries/s")
}

// inParallel calls fn for 0..n-1 from conc goroutines.
func inParallel(b *testing.B, conc, n int, fn func(i int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// counter counts what a stand-in received, and tells when it reaches its target.
type counter struct {
	n, target int64
	first     atomic.Int64 // when the first arrived, in Unix nanoseconds
	reached   chan struct{}
}

func newCounter(target int) *counter {
	return &counter{target: int64(target), reached: make(chan struct{})}
}

func (c *counter) add() int64 {
	n := atomic.AddInt64(&c.n, 1)
	if n == 1 {
		c.first.Store(time.Now().UnixNano())
	}
	if n == c.target {
		close(c.reached)
	}
	return n
}

// wait waits for the target (at most a minute) and reports the rate from the first received to the
// last, unit per second, and how long the first took to arrive from start.
func (c *counter) wait(b *testing.B, start time.Time, unit string) {
	select {
	case <-c.reached:
	case <-time.After(time.Minute):
		b.Fatalf("%d of %d received after a minute", atomic.LoadInt64(&c.n), c.target)
	}
	first := time.Unix(0, c.first.Load())
	if c.target > 1 {
		b.ReportMetric(float64(c.target-1)/time.Since(first).Seconds(), unit)
	}
	b.ReportMetric(float64(first.Sub(start).Milliseconds()), "ms-to-first")
}
