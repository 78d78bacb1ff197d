package web

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/refusal"
)

// refusalStatus is the HTTP status of each refusal code: the domain says what is refused and why
// (internal/refusal), this table alone says how HTTP shows it. docs/api.md lists the codes; a code
// missing here is a bug, answered 500 and logged (TestEveryRefusalCodeHasAStatus finds it first).
var refusalStatus = map[string]int{
	// The request itself.
	"invalid_json":                  400,
	"invalid_request":               400,
	"missing_field":                 400,
	"unknown_field":                 400,
	"invalid_model":                 400,
	"model_unavailable":             400,
	"invalid_prompt":                400,
	"invalid_seconds":               400,
	"seconds_duration_mismatch":     400,
	"invalid_aspect_ratio":          400,
	"invalid_size":                  400,
	"size_mismatch":                 400,
	"invalid_seed":                  400,
	"unsupported_input_combination": 400,
	"unsupported_value":             400,
	"invalid_value":                 400, // a webhook endpoint's url, name, event types or list cursor
	"too_many_images":               400,
	"too_many_videos":               400,
	"too_many_audios":               400,
	"invalid_media_url":             400,
	"url_not_allowed":               400,
	"import_failed":                 400,
	"file_upload_not_supported":     400,
	"remix_not_supported":           400,
	"conflicting_fields":            400,
	"file_id_not_supported":         400,
	// Who is asking.
	"missing_api_key":  401,
	"invalid_api_key":  401,
	"account_disabled": 401,
	// Money.
	"insufficient_balance": 402,
	// What the key may do (docs/api-keys.md): a model outside its list is forbidden to the key, as
	// OpenAI answers a model a project may not use; a spent limit is 429 as OpenAI's exhausted project
	// budget (insufficient_quota) is, with Retry-After at the reset and x-should-retry: false.
	"model_not_allowed_for_key": 403,
	"key_scope_missing":         403, // a key without webhooks:write on /v1/webhook_endpoints
	"key_spend_limit_reached":   429,
	// What is asked for.
	"not_found":            404,
	"video_expired":        404,
	"variant_unavailable":  404,
	"method_not_allowed":   405,
	"idempotency_conflict": 409,
	"video_not_ready":      409,
	"video_not_finished":   409,
	// Size and type.
	"file_too_large":           413,
	"request_too_large":        413,
	"unsupported_content_type": 415,
	"unsupported_media_type":   415,
	// Pace.
	"rate_limited": 429,
	"no_capacity":  429,
	// Ours.
	"internal_error": 500,
	"shutting_down":  503,
	// A dependency (the database, file storage) is down for the moment.
	"service_unavailable": 503,
}

// notRetried are the codes OpenAI's SDKs must not retry blindly: their answers carry x-should-retry:
// false (a download of a video not ready is polled for, not retried; a delete of one not finished waits
// for it to finish; a key's spent limit resets hours away, not in an SDK's back-off).
var notRetried = map[string]bool{"video_not_ready": true, "video_not_finished": true, "key_spend_limit_reached": true}

// httpRefusal is a refusal whose status the HTTP layer decided itself (a request Fiber could not read),
// not from its code.
type httpRefusal struct {
	r      *refusal.Error
	status int
}

func (e *httpRefusal) Error() string { return e.r.Error() }
func (e *httpRefusal) Unwrap() error { return e.r }

// statusOf is the HTTP status of an error's refusal, and the refusal: the table's, or an httpRefusal's
// own; 500 internal_error for anything else.
func StatusOf(err error) (int, *refusal.Error, bool) {
	var hr *httpRefusal
	if errors.As(err, &hr) {
		return hr.status, hr.r, true
	}
	r, ok := refusal.As(err)
	if !ok {
		return fiber.StatusInternalServerError, refusal.Internal, false
	}
	status, known := refusalStatus[r.Code]
	if !known {
		return fiber.StatusInternalServerError, refusal.Internal, false
	}
	return status, r, true
}

// errorType groups statuses the way OpenAI's error bodies do, so SDKs classify them sensibly.
func errorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 402:
		return "billing_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 409:
		return "conflict_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	default:
		return "invalid_request_error"
	}
}
