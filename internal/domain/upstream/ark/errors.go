package ark

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"videogen/internal/domain/upstream"
)

// callKind says what a call was about, which decides what some answers mean.
type callKind int

const (
	callSubmit callKind = iota // POST: no task exists yet
	callTask                   // GET of an existing task
	callCancel                 // DELETE of an existing task
)

// Error codes whose meaning does not follow from the HTTP status alone (the BytePlus ModelArk and
// Volcengine Ark common error-code tables; docs/upstreams.md#errors cites them).
const (
	// 403 AccountOverdueError: "your account has an overdue balance"; 403 OperationDenied.ServiceOverdue:
	// "your account balance is overdue, please recharge". The account, not the key.
	codeAccountOverdue = "AccountOverdueError"
	codeServiceOverdue = "OperationDenied.ServiceOverdue"
	// 403 OperationDenied.ServiceNotOpen: "the model service is unavailable, please activate the
	// corresponding model service"; 404 ModelNotOpen: "your account has not activated the model". One
	// model on this account, not the key.
	codeServiceNotOpen = "OperationDenied.ServiceNotOpen"
	codeModelNotOpen   = "ModelNotOpen"
	// 400 InvalidEndpoint.ClosedEndpoint: "the endpoint is currently closed or temporarily unavailable.
	// Please try again later".
	codeClosedEndpoint = "InvalidEndpoint.ClosedEndpoint"
	// 429 SetLimitExceeded: "Your account [%s] has reached the set inference limit for the [%s] model,
	// and the model service has been paused. … adjust or close the "Safe Experience Mode"". One model,
	// until someone acts in the console.
	codeSetLimitExceeded = "SetLimitExceeded"
	// 429 QuotaExceeded means three things (Volcengine 错误码, 82379/1299023): "has exhausted its free
	// trial quota for the [%s] model" and "exceeded the 5-hour/weekly/monthly usage quota" need someone
	// to act; "The request has exceeded the quota" is the account's queued-task limit, which drains by
	// itself. 429 ModelQuotaExhausted (BytePlus "Free Tokens Only Mode") is one model's free tokens.
	codeQuotaExceeded       = "QuotaExceeded"
	codeModelQuotaExhausted = "ModelQuotaExhausted"
)

// closesRoute reports whether a submission's refusal is about one model on this account and needs an
// operator's action (docs/upstreams.md#ark-errors): the route stops taking work, the credential's other
// routes go on, and the task goes to another route or fails at once — never retried until RUN_TIMEOUT.
// Any 403 of a submission that is not about the account's balance is read the same way: Ark names no 403
// that refuses the key (that is 401), and AccessDenied is given for one model the account may not use.
func closesRoute(status int, code, msg string) bool {
	switch {
	case code == codeServiceNotOpen || code == codeModelNotOpen || code == codeSetLimitExceeded || code == codeModelQuotaExhausted:
		return true
	case code == codeQuotaExceeded:
		// Only the documented quotas that need someone to act; any other wording (the queued-task limit,
		// a message in another language) is read as busy, which drains by itself.
		return strings.Contains(msg, "free trial quota") || strings.Contains(msg, "usage quota")
	case status == http.StatusForbidden:
		return code != codeAccountOverdue && code != codeServiceOverdue
	}
	return false
}

// classify maps an Ark error answer to the error the worker acts on (docs/upstreams.md#errors has
// the table). Messages are kept for staff except where the answer is about the key or the account:
// a provider's message about a refused key may quote part of it.
func classify(resp *http.Response, call callKind) error {
	var body struct {
		Error wireError `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxError)).Decode(&body)
	code, msg := body.Error.Code, body.Error.Message
	s := resp.StatusCode
	name := [...]string{callSubmit: "submit", callTask: "poll", callCancel: "cancel"}[call]
	detail := fmt.Sprintf("ark %s: HTTP %d %s: %s", name, s, code, msg)
	switch {
	case code == codeAccountOverdue || code == codeServiceOverdue:
		return fmt.Errorf("%w: ark %s: HTTP %d %s", upstream.ErrOutOfCredit, name, s, code)
	case call == callSubmit && closesRoute(s, code, msg):
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case code == codeServiceNotOpen || code == codeModelNotOpen:
		// About a task that exists: it was created while the model was open. Moving it to another
		// route would pay for it twice, so it is only retried until the model is open again or the
		// run deadline gives up on it.
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case code == codeClosedEndpoint:
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case s == http.StatusTooManyRequests:
		// Every documented 429 (RateLimitExceeded.*, QuotaExceeded, ServerOverloaded, …) asks to
		// try again later; none says the account is out of credit (that is 403 AccountOverdueError).
		return &upstream.BusyError{RetryAfter: upstream.ParseRetryAfter(resp.Header, time.Now()), Detail: detail}
	case s == http.StatusUnauthorized:
		return fmt.Errorf("%w: ark %s: HTTP %d %s", upstream.ErrAuth, name, s, code)
	case s == http.StatusForbidden && call == callCancel && strings.HasPrefix(code, "OperationDenied."):
		// OperationDenied.UnsupportedPhase, OperationDenied.InvalidState: "not supported while the
		// target is in its current phase" — the task, not the key.
		return fmt.Errorf("%w: %s", upstream.ErrNotCancellable, detail)
	case s == http.StatusForbidden:
		// AccessDenied and the other refusals of the key.
		return fmt.Errorf("%w: ark %s: HTTP %d %s", upstream.ErrAuth, name, s, code)
	case s == http.StatusNotFound && call != callSubmit:
		return fmt.Errorf("%w: %s", upstream.ErrUnknownTask, detail)
	case s == http.StatusNotFound:
		// InvalidEndpointOrModel.NotFound, InvalidEndpoint.NotFound, ModelIDAccessDisabled: the
		// operator's route is wrong, not the request.
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case s == http.StatusRequestTimeout || s >= 500:
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case s >= 400 && call == callCancel:
		// Ark's table of what DELETE does in each state says a running or cancelled task cannot be
		// deleted, without naming the answer: any other refusal of a DELETE is that.
		return fmt.Errorf("%w: %s", upstream.ErrNotCancellable, detail)
	case s == http.StatusConflict:
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case s >= 400:
		return &upstream.RejectedError{Status: s, Code: code, Message: msg, Policy: policyCode(code)}
	default:
		return fmt.Errorf("%w: unexpected %s", upstream.ErrTransient, detail)
	}
}

// policyCode reports whether an Ark error code says the content broke Ark's content policy: the
// SensitiveContentDetected family (SensitiveContentDetected[.SevereViolation|.Violence],
// Input{Text,Image,Video,Audio}SensitiveContentDetected[.PolicyViolation|.PrivacyInformation],
// Output{Text,Image,Video,Audio}SensitiveContentDetected[.PolicyViolation]) and the risk-detection
// codes (InputTextRiskDetection, OutputImageRiskDetection, …). ContentSecurityDetectionError is the
// moderation service failing, not a refusal, and is not one.
func policyCode(code string) bool {
	return strings.Contains(code, "SensitiveContentDetected") || strings.HasSuffix(code, "RiskDetection")
}
