package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// APIError is an answer the server refused: its status and the body
// {"error": {"code", "message", "param", "type"}}, with the request id to quote to support.
type APIError struct {
	Status  int    // HTTP status, such as 400
	Code    string // stable machine-readable code, such as "invalid_model"; "" when the body had none
	Message string // what went wrong and what to do, for a person
	Param   string // the request field at fault ("model", "image_urls[1]"), "" when none
	Type    string // OpenAI's classification, such as "invalid_request_error"
	// RequestID is the answer's X-Request-Id, the handle support looks the call up by.
	RequestID string
	// RetryAfter is the server's Retry-After (429, 503), 0 when absent.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "videogen: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Param != "" {
		b.WriteString(" (" + e.Param + ")")
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" [request " + e.RequestID + "]")
	}
	return b.String()
}

// AsAPIError returns the *APIError inside err, if any.
func AsAPIError(err error) (*APIError, bool) {
	var e *APIError
	ok := errors.As(err, &e)
	return e, ok
}

// ErrorCode returns the error.code of the *APIError inside err, or "" when err is not a refusal by the
// server (a network error, a cancelled context).
func ErrorCode(err error) string {
	if e, ok := AsAPIError(err); ok {
		return e.Code
	}
	return ""
}

// VideoFailedError is what Wait returns for a video that finished as failed; its reservation was
// released, so nothing was charged.
type VideoFailedError struct {
	Video *Video
}

func (e *VideoFailedError) Error() string {
	code, msg := "unknown", "no reason given"
	if e.Video.Error != nil {
		code, msg = e.Video.Error.Code, e.Video.Error.Message
	}
	return fmt.Sprintf("video %s failed: %s: %s", e.Video.ID, code, msg)
}

// maxErrorBody bounds how much of an error answer is read: an error body is small, and a proxy's HTML
// page is only quoted.
const maxErrorBody = 64 << 10

// readAPIError turns a non-2xx answer into an *APIError and closes its body.
func readAPIError(resp *http.Response) *APIError {
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{
		Status:     resp.StatusCode,
		RequestID:  resp.Header.Get("X-Request-Id"),
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
	var body struct {
		Error *struct {
			Code      string  `json:"code"`
			Message   string  `json:"message"`
			Param     *string `json:"param"`
			Type      string  `json:"type"`
			RequestID string  `json:"request_id"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		e.Code, e.Message, e.Type = body.Error.Code, body.Error.Message, body.Error.Type
		if body.Error.Param != nil {
			e.Param = *body.Error.Param
		}
		if e.RequestID == "" {
			e.RequestID = body.Error.RequestID
		}
		return e
	}
	// Not the API's error body (a proxy or load balancer answered): keep what helps a person.
	e.Message = http.StatusText(resp.StatusCode)
	if s := strings.TrimSpace(string(raw)); s != "" {
		if len(s) > 200 {
			s = s[:200] + "…"
		}
		e.Message += ": " + s
	}
	return e
}
