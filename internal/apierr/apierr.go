// Package apierr is the error every API answer is made of: an HTTP status, a stable code, a message a
// person can act on and the request field at fault. Domain packages return it; handlers render it.
package apierr

import (
	"errors"
	"fmt"
	"strconv"
)

// Error is a client-facing failure with a stable code (docs/design.md §6). Codes never change once shipped.
type Error struct {
	Status  int
	Code    string
	Message string
	Param   string // request field at fault, "" when none
	// RetryAfter, in seconds, is sent as Retry-After (429 answers always carry it).
	RetryAfter int
	// Header holds extra response headers the answer must carry (e.g. x-should-retry).
	Header map[string]string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Type groups codes the way OpenAI's error bodies do, so SDKs classify them sensibly.
func (e *Error) Type() string {
	switch {
	case e.Status == 401:
		return "authentication_error"
	case e.Status == 402:
		return "billing_error"
	case e.Status == 404:
		return "not_found_error"
	case e.Status == 409:
		return "conflict_error"
	case e.Status == 429:
		return "rate_limit_error"
	case e.Status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}

// New makes an error without a field.
func New(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Field makes a 400-class error about one request field.
func Field(status int, code, param, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
}

// As returns the *Error inside err, if any.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// The errors that more than one place returns.
var (
	NotFound      = &Error{Status: 404, Code: "not_found", Message: "No video with this id exists for your account. Check the id and the API key's account."}
	Internal      = &Error{Status: 500, Code: "internal_error", Message: "Something went wrong on our side. Quote the request id to support; do not blindly repeat a create — list your tasks first."}
	MissingAPIKey = &Error{Status: 401, Code: "missing_api_key", Message: "Send your API key in the header 'Authorization: Bearer <key>'."}
	InvalidAPIKey = &Error{Status: 401, Code: "invalid_api_key", Message: "This API key is unknown or has been revoked. Check the key, or use a current one."}
	// AccountDisabled answers every key of an account staff disabled: the key itself is fine, so the
	// customer is told that a new key will not help and whom to ask.
	AccountDisabled = &Error{Status: 401, Code: "account_disabled", Message: "This account is disabled, so none of its API keys are accepted. Contact support."}

	VideoNotReady = &Error{Status: 409, Code: "video_not_ready", Message: "The video is not completed yet. Keep polling GET /v1/videos/{id} until status is completed.", Header: map[string]string{"x-should-retry": "false"}}
	VideoFailed   = &Error{Status: 409, Code: "video_not_ready", Message: "This video failed, so there is no file to download; its error says why, and its reservation was released. Create a new video to try again.", Header: map[string]string{"x-should-retry": "false"}}
	// VideoNotFinished refuses DELETE of a queued or in-progress task: its generation may already be paid
	// for upstream, and this version cancels nothing there. Not retried by OpenAI's SDKs (x-should-retry).
	VideoNotFinished = &Error{Status: 409, Code: "video_not_finished", Header: map[string]string{"x-should-retry": "false"},
		Message: "This video is still queued or in progress, so it cannot be deleted yet: generation is not cancelled in this version. Poll GET /v1/videos/{id} until it is completed or failed, then delete it."}
	VideoExpired = &Error{Status: 404, Code: "video_expired", Message: "This video's retention period has ended and it was deleted. Generate it again if you need it."}
	// InvalidVariant refuses a content download of a variant OpenAI's API does not define.
	InvalidVariant = &Error{Status: 400, Code: "invalid_request", Param: "variant", Message: "The variant must be video (the default), thumbnail or spritesheet."}
	RequestTooBig  = &Error{Status: 413, Code: "request_too_large", Message: "The request body is larger than 1 MiB. Media go into a request as URLs, never as inline data."}
	NotJSON        = &Error{Status: 415, Code: "unsupported_content_type", Message: "Send the request body as JSON with 'Content-Type: application/json'."}
	// ShuttingDown answers a request the server could not finish before it stopped (a body still
	// arriving, an import still fetching): nothing of it was kept, and another instance, or this one
	// restarted, takes it.
	ShuttingDown = &Error{Status: 503, Code: "shutting_down", RetryAfter: 5,
		Message: "The server is restarting and did not finish this request; nothing of it was kept. Send it again in a few seconds."}
)

// VariantUnavailable is the 404 for a still the video has none of: its provider gave none and none could
// be made (docs/api.md#variants). The video itself is there.
func VariantUnavailable(variant string) *Error {
	return &Error{Status: 404, Code: "variant_unavailable",
		Message: "This video has no " + variant + ": its provider did not supply one and none could be made. The video itself is available with variant=video."}
}

// NoBalance is the 402 for a create the available balance does not cover.
func NoBalance(cost, available string) *Error {
	return &Error{Status: 402, Code: "insufficient_balance",
		Message: "This video costs " + cost + " but your available balance is " + available + ". Top up your wallet, then retry."}
}

// RateLimited is the 429 for a key that sends too fast.
func RateLimited(retryAfter int) *Error {
	return &Error{Status: 429, Code: "rate_limited", RetryAfter: max(retryAfter, 1),
		Message: "Too many requests with this API key. Wait for the number of seconds in Retry-After, and poll with growing intervals."}
}

// NoUpstream is the 429 for a model whose every upstream credential is unhealthy right now: a task
// created now could not start, so none is queued.
func NoUpstream(retryAfter int) *Error {
	return &Error{Status: 429, Code: "no_capacity", RetryAfter: max(retryAfter, 1),
		Message: "No generation capacity is available for this model right now. Retry after Retry-After seconds; nothing was charged."}
}

// NoCapacity is the 429 for an account whose backlog of waiting tasks is full.
func NoCapacity(retryAfter, backlog int) *Error {
	return &Error{Status: 429, Code: "no_capacity", RetryAfter: max(retryAfter, 1),
		Message: "You already have " + strconv.Itoa(backlog) + " tasks waiting for generation capacity. Retry after Retry-After seconds, when some have started."}
}
