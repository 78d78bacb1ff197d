package handlers_test

import (
	"bufio"
	"database/sql"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
)

// BenchmarkPoll measures GET /v1/videos/{id} through the real app — every middleware of the API's chain,
// the key check, the rate limiter, the poll, the JSON and the call-log row — on a real database, with the
// poll cache on (every poll a hit) and off (POLL_CACHE_TTL=0: every poll reads its row). It calls the
// app's fasthttp handler directly and writes the answer as the server would, so it measures videogen's
// work rather than a network stack; "bare" is a Fiber handler answering a small JSON object the same
// way, the limit the others are set against (docs/performance.md).
//
// ns/op is the wall time of the polls, the call-log writer running beside them. cpu-ns/op, B/op and
// allocs/op are the whole cost of a poll to the process, every goroutine's share included: they are
// taken once every poll's call-log row is written (the writer batches them off the request), so they do
// not depend on how many rows were still queued when the polls ended.
//
//	go test ./handlers/ -run '^$' -bench BenchmarkPoll -benchmem
//
// With TEST_DATABASE_URL set, PostgreSQL too.
func BenchmarkPoll(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		benchHandler(b, bareHandler(), "/v1/videos/video_AAAAAAAAAAAAAAAAAAAAAAAA", "", nil)
	})
	engines := []struct{ name, url string }{{"sqlite", testkit.SQLiteURL(b)}}
	if os.Getenv("TEST_DATABASE_URL") != "" {
		engines = append(engines, struct{ name, url string }{"postgres", testkit.PostgresURL(b)})
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			over := map[string]string{"POLL_CACHE_TTL": "1h", "LOG_LEVEL": "warn", "SIM_DURATION": "10ms"}
			s := testkit.Start(b, e.url, over)
			acct := s.NewAccount(b, "100")
			id := s.CreateVideo(b, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "seconds": 4, "aspect_ratio": "16:9",
				"prompt": "A lighthouse on a rocky headland at dusk, waves breaking below, the beam sweeping slowly through sea mist; " +
					"gulls wheel in the last light and a fishing boat rounds the point, its wake catching the glow."})["id"].(string)
			log := &callLog{db: s.DB, want: 1} // the create's row
			// Waited for in the database, not by polling the API: every API request adds a row.
			testkit.Eventually(b, time.Minute, "the task completes", func() bool {
				var status string
				s.DB.R.Raw("SELECT status FROM tasks WHERE id = ?", id).Scan(&status)
				return status == "completed"
			})
			// A second instance on the same database, with the cache off.
			off := testkit.Start(b, e.url, map[string]string{"POLL_CACHE_TTL": "0", "WORKERS": "false", "LOG_LEVEL": "warn"})
			b.Run("hit", func(b *testing.B) { benchHandler(b, s.App.Handler(), "/v1/videos/"+id, acct.Key, log) })
			b.Run("cache_off", func(b *testing.B) { benchHandler(b, off.App.Handler(), "/v1/videos/"+id, acct.Key, log) })
		})
	}
}

// callLog follows the call-log rows the servers on one database have written.
type callLog struct {
	db   *db.DB
	want int64 // rows of the API requests sent so far; the table's ids count from 1 without gaps
}

// wait waits until every request sent so far has its row.
func (l *callLog) wait(b *testing.B) {
	b.Helper()
	testkit.Eventually(b, time.Minute, "every poll's call-log row is written", func() bool {
		var last sql.NullInt64
		if err := l.db.R.Raw("SELECT max(id) FROM call_logs").Scan(&last).Error; err != nil {
			b.Fatal(err)
		}
		return last.Int64 >= l.want
	})
}

// benchHandler sends GET path with key to h b.N times, from many goroutines at once as a loaded server
// would, each as a fasthttp server does on one connection: the request as parsed, the handler, the
// answer written out. log is the call log the polls write to (nil: none).
func benchHandler(b *testing.B, h fasthttp.RequestHandler, path, key string, log *callLog) {
	var req fasthttp.Request
	req.Header.SetMethod(fasthttp.MethodGet)
	req.SetRequestURI(path)
	req.Header.SetHost("api.example.com")
	if key != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, "Bearer "+key)
	}
	serve := func(ctx *fasthttp.RequestCtx, w *bufio.Writer) error {
		req.CopyTo(&ctx.Request)
		ctx.Response.Reset()
		h(ctx)
		if ctx.Response.StatusCode() != fasthttp.StatusOK {
			return fmt.Errorf("GET %s: %d %s", path, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		return ctx.Response.Write(w)
	}
	newConn := func() (*fasthttp.RequestCtx, *bufio.Writer) {
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
		return &ctx, bufio.NewWriter(io.Discard)
	}
	if err := serve(newConn()); err != nil { // the first poll fills the caches
		b.Fatal(err)
	}
	settled := func() {
		if log != nil {
			log.wait(b)
		}
	}
	if log != nil {
		log.want++
	}
	settled() // nothing of the set-up left to write
	b.SetParallelism(16)
	b.ReportAllocs()
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx, w := newConn()
		for pb.Next() {
			if err := serve(ctx, w); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if log != nil {
		log.want += int64(b.N)
	}
	settled()
	n := float64(b.N)
	b.ReportMetric(float64(processCPU()-cpu)/n, "cpu-ns/op")
	runtime.ReadMemStats(&mem1)
	b.ReportMetric(float64(mem1.TotalAlloc-mem0.TotalAlloc)/n, "B/op")
	b.ReportMetric(float64(mem1.Mallocs-mem0.Mallocs)/n, "allocs/op")
}

// processCPU is the CPU time this process has used, user and system, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// bareHandler is the limit the poll is set against: a Fiber handler that answers a small JSON object and
// does nothing else (as cmd/videogen-bench's bare handler).
func bareHandler() fasthttp.RequestHandler {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/v1/videos/:id", func(c *fiber.Ctx) error {
		return c.JSON(fiber.Map{"id": c.Params("id"), "object": "video", "status": "queued", "progress": 0})
	})
	return app.Handler()
}
