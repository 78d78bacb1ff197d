package calllog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/calllog"
	"videogen/internal/testkit"
	"videogen/models"
)

// BenchmarkRecord: requests recording their rows at once, each waiting for its commit, as the API's
// requests do — one at a time (ns/op is then one commit), 64 at a time (make bench's connections) and
// 1,024. rows/s is the writer's throughput
// (b.N over the whole run, the last commit included), rows/batch the mean rows per transaction,
// largest-batch the largest. ns/op is the time per row of the whole group, not one request's wait.
// SQLite always, PostgreSQL when TEST_DATABASE_URL is set; each on a fresh database.
func BenchmarkRecord(b *testing.B) {
	engines := []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", testkit.SQLiteURL}}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		engines = append(engines, struct {
			name string
			url  func(testing.TB) string
		}{"postgres", testkit.PostgresURL})
	}
	for _, e := range engines {
		for _, waiters := range []int{1, 64, 1024} {
			b.Run(fmt.Sprintf("%s/waiters=%d", e.name, waiters), func(b *testing.B) {
				d := open(b, e.url(b))
				w := calllog.NewWriter(d, slog.New(slog.NewTextHandler(io.Discard, nil)))
				go func() { _ = w.Run(context.Background()) }()
				acct := int64(1)
				var n atomic.Int64
				record := func() {
					w.Record(models.CallLog{At: time.Now().UTC().Truncate(time.Microsecond), RequestID: "req_bench", AccountID: &acct,
						KeyPrefix: "vg_live_abcd", Method: "GET", Path: "/v1/videos/video_0123456789abcdef", Status: 200,
						LatencyMicros: n.Add(1), TaskID: "video_0123456789abcdef"})
				}
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				if waiters == 1 {
					for range b.N {
						record() // a lone request on an idle server: ns/op is one commit
					}
				} else {
					b.SetParallelism(max(waiters/runtime.GOMAXPROCS(0), 1))
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							record()
						}
					})
				}
				if err := w.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "rows/s")
				st := w.Stats()
				b.ReportMetric(float64(st.Rows)/float64(max(st.Batches, 1)), "rows/batch")
				b.ReportMetric(float64(st.Largest), "largest-batch")
			})
		}
	}
}
