// Package refusal is what the domain says when it will not do what was asked: a stable code, a message
// a person can act on, the request field at fault, and when to try again. It knows nothing of HTTP: the
// API layer turns each code into its status (handlers/web/refusal_status.go), so the same refusal can reach a
// JSON answer, a console page or a command line.
package refusal

import (
	"errors"
	"fmt"
	"strconv"
)

// Error is a refusal with a stable code (docs/api.md lists them). Codes never change once shipped.
type Error struct {
	Code    string
	Message string
	Param   string // request field at fault, "" when none
	// RetryAfter, in seconds, says when trying again may succeed (0: not a matter of waiting).
	RetryAfter int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New makes a refusal without a field.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Field makes a refusal about one request field.
func Field(code, param, format string, args ...any) *Error {
	return &Error{Code: code, Param: param, Message: fmt.Sprintf(format, args...)}
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
	NotFound      = &Error{Code: "not_found", Message: "No video with this id exists for your account. Check the id and the API key's account."}
	Internal      = &Error{Code: "internal_error", Message: "Something went wrong on our side. Quote the request id to support; do not blindly repeat a create — list your tasks first."}
	MissingAPIKey = &Error{Code: "missing_api_key", Message: "Send your API key in the header 'Authorization: Bearer <key>'."}
	InvalidAPIKey = &Error{Code: "invalid_api_key", Message: "This API key is unknown or has been revoked. Check the key, or use a current one."}
	// AccountDisabled answers every key of an account staff disabled: the key itself is fine, so the
	// customer is told that a new key will not help and whom to ask.
	AccountDisabled = &Error{Code: "account_disabled", Message: "This account is disabled, so none of its API keys are accepted. Contact support."}

	VideoNotReady = &Error{Code: "video_not_ready", Message: "The video is not completed yet. Keep polling GET /v1/videos/{id} until status is completed."}
	VideoFailed   = &Error{Code: "video_not_ready", Message: "This video failed, so there is no file to download; its error says why, and its reservation was released. Create a new video to try again."}
	VideoExpired  = &Error{Code: "video_expired", Message: "This video's retention period has ended and it was deleted. Generate it again if you need it."}
	// InvalidVariant refuses a content download of a variant OpenAI's API does not define.
	InvalidVariant = &Error{Code: "invalid_request", Param: "variant", Message: "The variant must be video (the default), thumbnail, spritesheet or last_frame."}
	RequestTooBig  = &Error{Code: "request_too_large", Message: "The request body is larger than 1 MiB. Media go into a request as URLs, never as inline data."}
	NotJSON        = &Error{Code: "unsupported_content_type", Message: "Send the request body as JSON with 'Content-Type: application/json'."}
	// ShuttingDown answers a request the server could not finish before it stopped (a body still
	// arriving, an import still fetching): nothing of it was kept, and another instance, or this one
	// restarted, takes it.
	// DatabaseUnavailable and StorageUnavailable answer a request that met a dependency down for the
	// moment (docs/operations.md, "Dependency faults"): the client is told to come back, not that we failed.
	DatabaseUnavailable = &Error{Code: "service_unavailable", RetryAfter: 5,
		Message: "The service cannot reach its database for a moment. Send the request again after Retry-After seconds; for a create, send the same Idempotency-Key so that it cannot run twice."}
	StorageUnavailable = &Error{Code: "service_unavailable", RetryAfter: 10,
		Message: "File storage is unavailable for a moment, so nothing was stored or read. Send the request again after Retry-After seconds."}
	ShuttingDown = &Error{Code: "shutting_down", RetryAfter: 5,
		Message: "The server is restarting and did not finish this request; nothing of it was kept. Send it again in a few seconds."}
)

// CannotCancel refuses to cancel a queued or in-progress video (DELETE /v1/videos/{id}, the console's
// Cancel): message says why — it is being submitted, its provider cannot stop it now, or could not be
// asked — and that nothing changed.
func CannotCancel(message string) *Error {
	return &Error{Code: "video_not_finished", Message: message}
}

// VariantUnavailable refuses a still the video has none of: its provider gave none and none could
// be made (docs/api.md#variants). The video itself is there.
func VariantUnavailable(variant string) *Error {
	return &Error{Code: "variant_unavailable",
		Message: "This video has no " + variant + ": its provider did not supply one and none could be made. The video itself is available with variant=video."}
}

// NoBalance refuses a create the available balance does not cover.
func NoBalance(cost, available string) *Error {
	return &Error{Code: "insufficient_balance",
		Message: "This video costs " + cost + " but your available balance is " + available + ". Top up your wallet, then retry."}
}

// RateLimited refuses a request of a key that sends too fast.
func RateLimited(retryAfter int) *Error {
	return &Error{Code: "rate_limited", RetryAfter: max(retryAfter, 1),
		Message: "Too many requests with this API key. Wait for the number of seconds in Retry-After, and poll with growing intervals."}
}

// NoUpstream refuses a create for a model whose every upstream credential is unhealthy right now: a task
// created now could not start, so none is queued.
func NoUpstream(retryAfter int) *Error {
	return &Error{Code: "no_capacity", RetryAfter: max(retryAfter, 1),
		Message: "No generation capacity is available for this model right now. Retry after Retry-After seconds; nothing was charged."}
}

// NoCapacity refuses a create for an account whose backlog of waiting tasks is full.
func NoCapacity(retryAfter, backlog int) *Error {
	return &Error{Code: "no_capacity", RetryAfter: max(retryAfter, 1),
		Message: "You already have " + strconv.Itoa(backlog) + " tasks waiting for generation capacity. Retry after Retry-After seconds, when some have started."}
}
