package web

import (
	"bytes"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/helmet"
	"github.com/valyala/fasthttp"
)

// SecurityHeaders is helmet.New(cfg) made cheap. The headers helmet sets are the same on every answer,
// so they are found once, by running helmet itself, and then set with their names already in the
// server's canonical case: the same names, values and order on the wire, without normalizing a dozen
// names on every request (a fifth of a cached poll's own time). A configuration whose headers depend on
// the request (Next, HSTS) gets helmet itself.
func SecurityHeaders(cfg helmet.Config) fiber.Handler {
	if cfg.Next != nil || cfg.HSTSMaxAge != 0 {
		return helmet.New(cfg)
	}
	headers := helmetHeaders(cfg)
	return func(c *fiber.Ctx) error {
		h := &c.Response().Header
		for _, kv := range headers {
			h.SetCanonical(kv.name, kv.value)
		}
		return c.Next()
	}
}

type header struct{ name, value []byte }

// helmetHeaders returns the headers helmet with cfg sets on an answer, in the order it sets them.
func helmetHeaders(cfg helmet.Config) []header {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(helmet.New(cfg))
	app.Get("/", func(*fiber.Ctx) error { return nil })
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/")
	app.Handler()(&ctx)
	var out []header
	ctx.Response.Header.VisitAll(func(k, v []byte) {
		switch string(k) {
		case fiber.HeaderContentType, fiber.HeaderContentLength, fiber.HeaderServer, fiber.HeaderDate,
			fiber.HeaderConnection, fiber.HeaderSetCookie, fiber.HeaderTransferEncoding, fiber.HeaderContentEncoding:
			return // the answer's own, not helmet's
		}
		out = append(out, header{bytes.Clone(k), bytes.Clone(v)})
	})
	return out
}
