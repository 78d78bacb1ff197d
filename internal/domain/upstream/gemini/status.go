package gemini

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genai"

	"videogen/internal/domain/upstream"
)

// status maps an operation onto ours. An operation that is not done is in progress: the Gemini API
// reports no queue position and no progress for Veo, so progress reads 0 until it is done.
func status(op *genai.GenerateVideosOperation) (upstream.Status, error) {
	st := upstream.Status{ID: op.Name, State: upstream.StateInProgress}
	if !op.Done {
		return st, nil
	}
	st.State = upstream.StateFailed
	switch {
	case op.Error != nil:
		// google.rpc.Status: {code (a google.rpc.Code number), message, details}.
		st.ErrorCode, st.ErrorMessage = rpcCodeName(op.Error["code"]), fmt.Sprint(op.Error["message"])
		// A finished operation refused as INVALID_ARGUMENT naming Veo's safety rules is a moderation block.
		st.PolicyFailure = st.ErrorCode == "INVALID_ARGUMENT" && safetyRefusal(st.ErrorMessage)
	case videoURI(op) != "":
		st.State, st.Progress = upstream.StateCompleted, 100
	case op.Response != nil && (op.Response.RAIMediaFilteredCount > 0 || len(op.Response.RAIMediaFilteredReasons) > 0):
		// Done, no video, and the videos were filtered by Google's Responsible AI checks: the content
		// policy withheld the output.
		st.ErrorCode, st.PolicyFailure = "rai_media_filtered", true
		st.RetryOnce = audioFiltered(op.Response.RAIMediaFilteredReasons)
		st.ErrorMessage = strings.Join(op.Response.RAIMediaFilteredReasons, " ")
		if st.ErrorMessage == "" {
			st.ErrorMessage = "the generated video was filtered by the provider's safety checks"
		}
	default:
		st.ErrorCode, st.ErrorMessage = "no_video", "the operation finished without a video"
	}
	return st, nil
}

// videoURI is the first generated video's file URI, or "".
func videoURI(op *genai.GenerateVideosOperation) string {
	if op == nil || op.Response == nil {
		return ""
	}
	for _, v := range op.Response.GeneratedVideos {
		if v != nil && v.Video != nil && v.Video.URI != "" {
			return v.Video.URI
		}
	}
	return ""
}

// rpcCodes names the google.rpc.Code numbers an operation's error carries.
var rpcCodes = map[int]string{
	1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
	6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
	10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
	15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}

func rpcCodeName(v any) string {
	n, ok := v.(float64) // JSON numbers decode as float64
	if !ok {
		return "UNKNOWN"
	}
	if name, ok := rpcCodes[int(n)]; ok {
		return name
	}
	return strconv.Itoa(int(n))
}

// answer is what the transport saw of the call's last answer, for what the SDK's APIError drops.
type answer struct{ header http.Header }

type answerKey struct{}

func withAnswer(ctx context.Context) (context.Context, *answer) {
	a := &answer{}
	return context.WithValue(ctx, answerKey{}, a), a
}

// recorder notes the Retry-After header of each answer in the call's answer (see withAnswer). The SDK
// makes one request per call (no retries), and reads the answer only after RoundTrip returned.
type recorder struct{ next http.RoundTripper }

func (t recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if resp != nil {
		if a, ok := r.Context().Value(answerKey{}).(*answer); ok {
			a.header = resp.Header
		}
	}
	return resp, err
}

// classify maps a failed SDK call onto the error the worker acts on, as the Gemini API's troubleshooting
// page documents its answers (ai.google.dev/gemini-api/docs/troubleshooting, "Backend error codes",
// read 2026-11-26). onTask is true for calls about an existing operation, where 404 means the Gemini
// API does not know it; on submit a 404 is about the model: the operator's route is wrong.
func classify(err error, ans *answer, call string, onTask bool) error {
	var ae genai.APIError
	if !errors.As(err, &ae) {
		// No answer (connection, timeout) or an unreadable one: the outcome is unknown. The SDK's
		// transport errors carry the URL, which holds no key (the key travels in a header).
		return fmt.Errorf("gemini %s: %w: %v", call, upstream.ErrTransient, cause(err))
	}
	code, state := ae.Code, ae.Status
	if code == 0 {
		// A body that was not JSON: the SDK put the HTTP status line in Status ("429 Too Many Requests").
		code, _ = strconv.Atoi(strings.Fields(state + " 0")[0])
	}
	detail := fmt.Sprintf("gemini %s: HTTP %d %s: %s", call, code, state, clip(ae.Message))
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden || (code == http.StatusBadRequest && reason(ae) == "API_KEY_INVALID"):
		// 403 PERMISSION_DENIED ("Your API key doesn't have the required permissions"), 401
		// UNAUTHENTICATED, and 400 INVALID_ARGUMENT with the reason API_KEY_INVALID ("API key not valid").
		// Only the status is kept: a message about a refused key may quote part of it.
		return fmt.Errorf("%w: gemini %s: HTTP %d %s", upstream.ErrAuth, call, code, state)
	case code == http.StatusBadRequest && state == "FAILED_PRECONDITION":
		// "Gemini API free tier is not available in your country. Please enable billing on your project
		// in Google AI Studio": the account cannot be billed, whatever the request.
		return fmt.Errorf("%w: %s", upstream.ErrOutOfCredit, detail)
	case code == http.StatusNotFound && onTask:
		return fmt.Errorf("%w: %s", upstream.ErrUnknownTask, detail)
	case code == http.StatusNotFound:
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case code == http.StatusTooManyRequests && creditDepleted(ae.Message):
		// 429 RESOURCE_EXHAUSTED "Your prepayment credits are depleted. Please go to AI Studio … to manage
		// your project and billing" (prepaid billing, since 2026-03-23): no retry helps until someone adds
		// credit, so it is the account's insufficient_quota, not a busy key.
		return fmt.Errorf("%w: insufficient_quota: %s", upstream.ErrOutOfCredit, detail)
	case code == http.StatusTooManyRequests:
		// RESOURCE_EXHAUSTED: a rate or quota limit. Its RetryInfo detail says when to come back.
		wait := retryDelay(ae)
		if wait == 0 {
			wait = upstream.ParseRetryAfter(ans.header, time.Now())
		}
		return &upstream.BusyError{RetryAfter: wait, Detail: detail}
	case code == http.StatusRequestTimeout || code == http.StatusConflict || code >= 500:
		// 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED: retry.
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case code >= 400:
		// 400 INVALID_ARGUMENT and other refusals of the request; Veo reports some moderation blocks as
		// INVALID_ARGUMENT naming its safety rules, which are the content policy, not the parameters.
		return &upstream.RejectedError{Status: code, Code: state, Message: ae.Message, Policy: safetyRefusal(ae.Message)}
	default:
		return fmt.Errorf("%w: unexpected %s", upstream.ErrTransient, detail)
	}
}

// reason is the ErrorInfo detail's reason (google.rpc.ErrorInfo), or "".
func reason(ae genai.APIError) string {
	for _, d := range ae.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			if r, ok := d["reason"].(string); ok {
				return r
			}
		}
	}
	return ""
}

// retryDelay is the RetryInfo detail's retryDelay (google.rpc.RetryInfo, a Duration in its JSON form
// "33s"), or 0.
func retryDelay(ae genai.APIError) time.Duration {
	for _, d := range ae.Details {
		if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo" {
			if s, ok := d["retryDelay"].(string); ok {
				if v, err := time.ParseDuration(s); err == nil && v > 0 {
					return v
				}
			}
		}
	}
	return 0
}

// clip bounds a provider message kept in an error.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// creditDepleted reports whether a 429's message says the account's prepaid credit is used up (as the
// Gemini API words it: "Your prepayment credits are depleted").
func creditDepleted(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "prepayment credits") || strings.Contains(m, "credits are depleted") || strings.Contains(m, "billing account")
}

// safetyWords are what Veo's refusals of content say (the Gemini API's and Vertex AI's "Responsible
// AI" wording: "violate our policies", "usage guidelines", "safety", support codes).
var safetyWords = []string{"safety", "responsible ai", "violate", "usage guidelines", "policies", "support codes", "sensitive"}

// safetyRefusal reports whether a refusal's message says the content broke Veo's rules.
func safetyRefusal(msg string) bool {
	m := strings.ToLower(msg)
	for _, w := range safetyWords {
		if strings.Contains(m, w) {
			return true
		}
	}
	return false
}

// audioFiltered reports whether a filtered operation's reasons blame the sound track ("We encountered
// an issue with the audio for your prompt"): the Veo page says such blocks come from safety filters "or
// other processing issues with the audio" and are not charged, so one retry is worth it.
func audioFiltered(reasons []string) bool {
	for _, r := range reasons {
		if strings.Contains(strings.ToLower(r), "audio") {
			return true
		}
	}
	return false
}
