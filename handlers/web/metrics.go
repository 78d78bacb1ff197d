package web

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/infra/db"
)

// unmatchedRoute labels the requests no route answered (404s of unknown paths, 405s): the paths clients
// make up never become label values.
const unmatchedRoute = "unmatched"

// measure counts every request for /metrics (nil Metrics: nothing), by method, route pattern and the
// status the client got, and the database statements it ran: the request's context counts them
// (db.CountQueries), so what background work runs beside it is not counted. The route is the one that answered: the endpoint's pattern, or for a request a
// group's middleware refused before any endpoint ran (401, 413, 429 under /v1) the group's prefix. It runs outside accessLog, which renders an error a route returned, so the
// status it reads after c.Next() is the one sent. Refusals fasthttp makes before any route runs (headers
// too large, a body cut off) do not get here; the access log records those.
func (h *Base) Measure(c *fiber.Ctx) error {
	if h.Metrics == nil {
		return c.Next()
	}
	start := time.Now()
	queries := db.CountQueries(c.UserContext())
	c.SetUserContext(queries)
	// The route is this middleware's own until another route matches: if it still is afterwards, no route
	// of the app took the request.
	entry := c.Route()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		// accessLog renders errors, so this is not expected; Fiber's error handler would send this status.
		status = fiber.StatusInternalServerError
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		}
	}
	route := unmatchedRoute
	if r := c.Route(); r != entry {
		route = r.Path // the registered pattern ("/v1/videos/:id"), not the request's path
	}
	h.Metrics.ObserveRequest(methodLabel(c.Method()), route, status, time.Since(start), queries.N())
	return err
}

// methodLabel names a request method with a constant string: Fiber's method string lives in a buffer
// reused by the next request, and the metric keeps its label values. Fiber answers 501 to any other
// method before the middleware runs.
func methodLabel(m string) string {
	switch m {
	case fiber.MethodGet:
		return fiber.MethodGet
	case fiber.MethodHead:
		return fiber.MethodHead
	case fiber.MethodPost:
		return fiber.MethodPost
	case fiber.MethodPut:
		return fiber.MethodPut
	case fiber.MethodPatch:
		return fiber.MethodPatch
	case fiber.MethodDelete:
		return fiber.MethodDelete
	case fiber.MethodOptions:
		return fiber.MethodOptions
	case fiber.MethodConnect:
		return fiber.MethodConnect
	case fiber.MethodTrace:
		return fiber.MethodTrace
	}
	return "other"
}
