package calllog_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/calllog"
	"videogen/internal/testkit"
	"videogen/models"
)

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
		b.Run(e.name, func(b *testing.B) {
			d := open(b, e.url(b))
			w := calllog.NewWriter(d, slog.New(slog.NewTextHandler(io.Discard, nil)))
			go func() { _ = w.Run(context.Background()) }()
			acct := int64(1)
			var n atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					w.Record(models.CallLog{At: time.Now().UTC().Truncate(time.Microsecond), RequestID: "req_bench", AccountID: &acct,
						KeyPrefix: "vg_live_abcd", Method: "GET", Path: "/v1/videos/video_0123456789abcdef", Status: 200,
						LatencyMicros: i, TaskID: "video_0123456789abcdef"})
				}
			})
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
