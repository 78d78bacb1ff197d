package web

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/helmet"
	"github.com/valyala/fasthttp"
)

var dateLine = regexp.MustCompile(`(?m)^Date: .*\r\n`)

// TestSecurityHeadersAreHelmets: SecurityHeaders writes exactly the header lines helmet writes, in its
// order — for the defaults and for a configuration like the app's — and leaves what the route sets.
func TestSecurityHeadersAreHelmets(t *testing.T) {
	for _, cfg := range []helmet.Config{{}, {
		ContentSecurityPolicy: "default-src 'self'; form-action 'self' https://checkout.stripe.com",
		XFrameOptions:         "DENY", ReferrerPolicy: "same-origin", ContentTypeNosniff: "nosniff",
		PermissionPolicy: "camera=(), microphone=()",
	}} {
		answer := func(mw fiber.Handler) string {
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			app.Use(func(c *fiber.Ctx) error { c.Set("X-Request-Id", "req_1"); return c.Next() }, mw)
			app.Get("/", func(c *fiber.Ctx) error { c.Set("Openai-Poll-After-Ms", "1000"); return c.JSON(map[string]int{"a": 1}) })
			var ctx fasthttp.RequestCtx
			ctx.Request.SetRequestURI("/")
			app.Handler()(&ctx)
			return dateLine.ReplaceAllString(ctx.Response.String(), "") // the date may turn between the two answers
		}
		want, got := answer(helmet.New(cfg)), answer(SecurityHeaders(cfg))
		if got != want {
			t.Errorf("SecurityHeaders answered\n%s\nhelmet\n%s", got, want)
		}
		if !strings.Contains(got, "X-Frame-Options") || !strings.Contains(got, "Openai-Poll-After-Ms: 1000") {
			t.Errorf("answer lacks helmet's or the route's headers:\n%s", got)
		}
	}
}
