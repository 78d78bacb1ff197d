package web

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/infra/blob"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/lingerclose"
	"videogen/internal/infra/storetext"
	"videogen/internal/refusal"
	"videogen/models"
)

// Locals keys that middleware and handlers share.
const (
	LocalRequestID = "request_id"
	LocalPrincipal = "principal"
	LocalTaskID    = "task_id"
	LocalAmount    = "amount_reserved"
	// LocalCallWritten is set when a create wrote the request's call-log row in its own transaction.
	LocalCallWritten = "call_written"
	LocalErrorCode   = "error_code"
	LocalErrorMsg    = "error_message"
	LocalBytesIn     = "bytes_in"
	LocalFiles       = "files"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code      string  `json:"code"`
	Message   string  `json:"message"`
	Param     *string `json:"param"`
	Type      string  `json:"type"`
	RequestID string  `json:"request_id,omitempty"`
}

// apiError renders any error as the API's error body, its status from the refusal's code
// (refusal_status.go). Errors that are not refusals are ours: they are logged with the request id and shown as
// internal_error, never with their text.
func (h *Base) APIError(c *fiber.Ctx, err error) error {
	if _, ok := refusal.As(err); !ok {
		var fe *fiber.Error
		switch {
		case errors.As(err, &fe) && fe.Code == fiber.StatusNotFound:
			err = refusal.New("not_found", "No such endpoint: %s %s. See the API reference in the README.", c.Method(), c.Path())
		case errors.As(err, &fe) && fe.Code == fiber.StatusMethodNotAllowed:
			err = refusal.New("method_not_allowed", "%s is not allowed on %s.", c.Method(), c.Path())
		case errors.As(err, &fe) && fe.Code == fiber.StatusRequestEntityTooLarge:
			err = refusal.RequestTooBig
		case errors.As(err, &fe) && fe.Code < 500:
			err = &httpRefusal{r: refusal.New("invalid_request", "The request could not be read: %s.", fe.Message), status: fe.Code}
		default:
			err = h.outage(c, err)
		}
	}
	status, ae, ok := StatusOf(err)
	if !ok {
		h.Log.Error("request failed", "request_id", RequestID(c), "path", c.Path(), "err", err)
	}
	c.Locals(LocalErrorCode, ae.Code)
	c.Locals(LocalErrorMsg, ae.Message)
	if notRetried[ae.Code] {
		c.Set("x-should-retry", "false")
	}
	if ae.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(ae.RetryAfter))
	}
	body := errorBody{Error: errorDetail{Code: ae.Code, Message: ae.Message, Type: errorType(status)}}
	if status >= 500 {
		// Support needs it to find the log line. Only here: a 404 for another account's task must be
		// byte-identical to one for a missing task (X-Request-Id carries it on every answer anyway).
		body.Error.RequestID = RequestID(c)
	}
	if ae.Param != "" {
		p := ae.Param
		body.Error.Param = &p
	}
	return c.Status(status).JSON(body)
}

// outage turns an error that says a dependency is down for the moment — the database unreachable, file
// storage failing — into its 503 service_unavailable refusal, logged as a warning and counted; any other
// error is returned as it was.
func (h *Base) outage(c *fiber.Ctx, err error) error {
	switch {
	case blob.IsUnavailable(err):
		h.Log.Warn("storage unavailable", "request_id", RequestID(c), "path", c.Path(), "err", err)
		return refusal.StorageUnavailable
	case db.IsUnavailable(err):
		h.Log.Warn("database unavailable", "request_id", RequestID(c), "path", c.Path(), "err", err)
		h.Metrics.DatabaseUnavailable()
		return refusal.DatabaseUnavailable
	}
	return err
}

// lastResortError handles what escapes the route chain, including errors fasthttp raises before any
// middleware runs (a header over its buffer, a body cut off): those requests get an id, an access-log
// line and, for the API, a call-log row here.
func (h *Base) LastResortError(c *fiber.Ctx, err error) error {
	if c.Locals(LocalRequestID) != nil {
		// A route ran: pages get pages, the API its error body.
		if !IsAPIPath(c.Path()) {
			return h.HTMLError(c, err)
		}
		return h.APIError(c, err)
	}
	// fasthttp refused the request while reading it and closes the connection after this answer with the
	// rest unread. Such a request may have lost its path and comes from a client, not a browser: JSON.
	lingerclose.Mark(c.Context().Conn())
	// No middleware ran: the headers every answer carries are set here.
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderContentSecurityPolicy, "default-src 'none'; frame-ancestors 'none'")
	h.SetStrictTransport(c)
	rid := ids.NewRequestID()
	c.Locals(LocalRequestID, rid)
	c.Set("X-Request-Id", rid)
	rerr := h.APIError(c, err)
	a, ok := h.arriving.LoadAndDelete(&c.Request().Header)
	if !ok {
		// The headers themselves were refused (too large, malformed): where the request was going and when
		// it began are unknown — fasthttp has stamped no time either — so nothing is made up.
		h.LogAccess(c, time.Time{}, "-", "-")
		return rerr
	}
	// The headers were read, then the body was cut off (the client went away, or the server is stopping):
	// fasthttp reset the request, but the logs record where it was going and since when.
	arr := a.(arrival)
	h.LogAccess(c, arr.at, arr.method, arr.path)
	h.CallLog.Record(models.CallLog{
		At: arr.at.UTC().Truncate(time.Microsecond), RequestID: rid, Method: arr.method, Path: arr.path,
		Status: c.Response().StatusCode(), ErrorCode: LocalString(c, LocalErrorCode), ErrorMessage: errorMessage(c),
		LatencyMicros: max(time.Since(arr.at).Microseconds(), 1),
	})
	return rerr
}

func IsAPIPath(p string) bool {
	// Routing ignores case, so this does too (without a lower-cased copy: it runs on every request).
	hasPrefix := func(prefix string) bool { return len(p) >= len(prefix) && strings.EqualFold(p[:len(prefix)], prefix) }
	return hasPrefix("/v1/") || strings.EqualFold(p, "/v1") || hasPrefix("/uploads/v1")
}

func RequestID(c *fiber.Ctx) string { return LocalString(c, LocalRequestID) }

// errorMessage is the request's refusal message for its call-log row: our own words, but they may quote
// what the client sent, so it is stored as client text is.
func errorMessage(c *fiber.Ctx) string { return LogText(LocalString(c, LocalErrorMsg), 500) }

// logText makes client-supplied text safe to store in the call log: a copy (Fiber's strings point into
// reused buffers), valid UTF-8 without NUL (PostgreSQL refuses both, and one bad row would fail its whole
// batch), at most n bytes.
func LogText(s string, n int) string {
	s, _ = storetext.Clip(s, n)
	return s
}

func LocalString(c *fiber.Ctx, key string) string {
	s, _ := c.Locals(key).(string)
	return s
}
