package handlers_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"videogen/internal/testkit"
)

// BenchmarkPoll measures GET /v1/videos/{id} through the real app — every middleware of the API's chain,
// the key check, the rate limiter, the poll, the JSON and the call-log row — on a real database, with the
// poll cache on (every poll a hit) and off (POLL_CACHE_TTL=0: every poll reads its row). It calls the
// app's fasthttp handler directly and writes the answer as the server would, so it measures videogen's
// work rather than a network stack; "bare" is a Fiber handler answering a small JSON object the same
// way, the limit the others are set against (docs/performance.md). Run with -benchmem: the allocations
// count every goroutine of the server (the call-log writer's too), as they are the cost of a poll.
//
//	go test ./handlers/ -run '^$' -bench BenchmarkPoll -benchmem
//
// With TEST_DATABASE_URL set, PostgreSQL too.
func BenchmarkPoll(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchHandler(b, bareHandler(), "/v1/videos/video_AAAAAAAAAAAAAAAAAAAAAAAA", "") })
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
			s.WaitStatus(b, acct.Key, id, time.Minute, "completed")
			// A second instance on the same database, with the cache off.
			off := testkit.Start(b, e.url, map[string]string{"POLL_CACHE_TTL": "0", "WORKERS": "false", "LOG_LEVEL": "warn"})
			b.Run("hit", func(b *testing.B) { benchHandler(b, s.App.Handler(), "/v1/videos/"+id, acct.Key) })
			b.Run("cache_off", func(b *testing.B) { benchHandler(b, off.App.Handler(), "/v1/videos/"+id, acct.Key) })
		})
	}
}

// benchHandler sends GET path with key to h b.N times, from many goroutines at once as a loaded server
// would (a poll waits for its call-log row, so a poll at a time would measure that wait), each as a
// fasthttp server does on one connection: the request as parsed, the handler, the answer written out.
// Beside ns/op (wall time, which on SQLite the call-log writer bounds) it reports cpu-ns/op, the
// process's CPU time per poll: what a poll costs the machine, every goroutine's share included, and a
// figure that other processes on a shared machine disturb far less.
func benchHandler(b *testing.B, h fasthttp.RequestHandler, path, key string) {
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
	b.SetParallelism(16)
	b.ReportAllocs()
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
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
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
