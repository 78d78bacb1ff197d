package web

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// accessLog writes one line per request at info: method, path, status, latency, request id and the API
// key's display prefix, so whoever runs the server sees requests arrive. The query string is never
// logged (signed media links carry sig=, verification links a token), nor any header. It also renders
// an error that escaped the routes, so the line has the status the client got. Health probes and static
// files are logged at debug, where they do not drown the rest.
func (h *Base) AccessLog(c *fiber.Ctx) error {
	// No line is below info but health probes' and static files' (debug): when info is off, none is
	// written, and the clock need not be read.
	var start time.Time
	if h.Log.Enabled(context.Background(), slog.LevelInfo) {
		start = time.Now()
	}
	err := c.Next()
	if err != nil {
		if rerr := h.LastResortError(c, err); rerr != nil {
			h.Log.Error("render error", "request_id", RequestID(c), "err", rerr)
			c.Status(fiber.StatusInternalServerError)
		}
	}
	h.LogAccess(c, start, c.Method(), c.Path())
	return nil
}

// logAccess writes the access-log line of a request that began at start.
func (h *Base) LogAccess(c *fiber.Ctx, start time.Time, method, path string) {
	level := slog.LevelInfo
	if path == "/healthz" || path == "/readyz" || strings.HasPrefix(path, "/static/") {
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !h.Log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", LogText(method, 16)),
		slog.String("path", LogText(path, 256)),
		slog.Int("status", c.Response().StatusCode()),
	}
	if !start.IsZero() { // zero: refused before its headers were read, so its start is unknown
		attrs = append(attrs, slog.Duration("latency", time.Since(start)))
	}
	attrs = append(attrs, slog.String("request_id", RequestID(c)))
	if p := Principal(c); p.KeyPrefix != "" {
		attrs = append(attrs, slog.String("key", p.KeyPrefix))
	}
	if u := CurrentUser(c); u != nil {
		attrs = append(attrs, slog.Int64("user", u.ID))
	}
	if code := LocalString(c, LocalErrorCode); code != "" {
		attrs = append(attrs, slog.String("error", code))
	}
	h.Log.LogAttrs(ctx, level, "request", attrs...)
}
