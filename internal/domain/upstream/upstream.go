// Package upstream is how videogen talks to the providers that generate videos: a small Provider
// interface (one implementation per protocol, registered in internal/domain/upstream/providers), the pool of
// credentials tasks are submitted with, their health, and the errors every provider maps to.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"videogen/internal/money"
	"videogen/models"
)

// Upstream task states, as every provider's adapter reports them (each maps its own onto these; see
// docs/upstreams.md for the tables).
const (
	StateQueued     = "queued"
	StateInProgress = "in_progress"
	StateCompleted  = "completed"
	StateFailed     = "failed"
)

// Credential is one upstream account key and what it serves. Its secret lives only in memory, read
// from the environment or a file named by the operator's upstreams file; it is never stored or logged.
type Credential struct {
	ID             string // stable across restarts and reloads; stored on tasks
	Name           string // the operator's label, shown to staff
	Kind           string // the protocol: sim, openai, ark or gemini
	BaseURL        string
	Secret         string
	MaxConcurrency int
	// Models maps each public model alias this credential serves to the provider's model and its cost.
	Models map[string]Route
	// Draining credentials take no new task but keep polling and copying the tasks they hold.
	Draining bool
	// Provider speaks the credential's protocol at its base URL.
	Provider Provider
}

// Route is how one credential serves one public model alias.
type Route struct {
	UpstreamModel string // the provider's name for the model
	// What the provider charges us: per second of video, or per million usage tokens when set (and the
	// provider reports usage); see docs/upstreams.md#cost.
	CostPerSecond        money.Micros
	CostPerMillionTokens money.Micros
	// Unpriced: the operator gave no cost (the built-in simulator, UPSTREAM_BASE_URL credentials); the
	// task's cost is left unrecorded rather than recorded as free, so the margin report counts it.
	Unpriced bool
	// Caps is what the upstream model renders: its row in the kind's capability table, narrowed by the
	// route's declaration in the upstreams file (docs/upstreams.md#capabilities).
	Caps Capabilities
}

// Serves reports whether the credential serves the alias.
func (c Credential) Serves(alias string) bool {
	_, ok := c.Models[alias]
	return ok
}

// String never shows the secret, so a credential printed by mistake leaks nothing.
func (c Credential) String() string { return fmt.Sprintf("upstream credential %s (%s)", c.ID, c.Kind) }

// SubmitRequest is a task as sent upstream: its video request (Model is the public alias), the
// provider's model name on this credential, and the key that makes a repeated submission find the first
// one instead of starting another (on protocols that have one).
type SubmitRequest struct {
	models.VideoRequest
	UpstreamModel  string
	IdempotencyKey string
	// UpstreamSize is the size to ask the provider for: the request's own, or the one the route maps it
	// to (Capabilities.SizeMap). Adapters send this, never VideoRequest.Size.
	UpstreamSize string
	// Expires is how long the provider may run the task before we give up on it (RUN_TIMEOUT); adapters
	// whose provider takes a bound (Ark's execution_expires_after) send it, clamped to what it accepts.
	Expires time.Duration
}

// Usage is what the provider reports having used for a task (Ark reports tokens).
type Usage struct {
	CompletionTokens int64
	TotalTokens      int64
}

// Status is an upstream task's state.
type Status struct {
	ID       string
	State    string
	Progress int
	// For a failed task: the provider's code and message (kept for staff, never shown to customers as
	// they are) and whether the provider said it broke its content policy.
	ErrorCode     string
	ErrorMessage  string
	PolicyFailure bool
	// RetryOnce: the provider says a failure of this kind is often passing (Veo's audio filter), so the
	// task is submitted once more on the same route before it fails.
	RetryOnce bool
	Usage     Usage
	// Rendered is what the provider reports it rendered, where it does (zero fields: not reported).
	Rendered Rendered
	// Conformed says what the adapter did to an input to fit the provider's exact demands ("first
	// frame cropped to 1280x720 …"), for the task log the customer reads; empty when nothing.
	Conformed string
}

// Rendered is what a provider says it actually rendered for a task.
type Rendered struct {
	Seed       *int64
	Size       string  // "WxH"
	Resolution string  // e.g. "720p"
	Ratio      string  // e.g. "16:9"
	Seconds    float64 // the video's duration
	FPS        int
}

// Errors every provider maps its failures to; the worker decides by them.
var (
	// ErrRejected: the upstream refused the task for good (a 4xx about the request). The task fails.
	ErrRejected = errors.New("upstream rejected the task")
	// ErrTransient: timeout, connection failure or 5xx. The outcome is unknown; retry the same call.
	ErrTransient = errors.New("upstream temporarily unavailable")
	// ErrBusy: the credential is at its concurrency or rate limit upstream (429). Retry later, same credential.
	ErrBusy = errors.New("upstream credential busy")
	// ErrUnknownTask: the upstream does not know this task id for this credential.
	ErrUnknownTask = errors.New("upstream does not know the task")
	// ErrAuth: the upstream refused the credential itself (401/403). The credential is marked unhealthy;
	// the call is retried later, like a transient error, once an operator has fixed the key.
	ErrAuth = errors.New("upstream refused the credential")
	// ErrRoute: a submission was refused because the provider does not know the model or endpoint for
	// this key (an operator's route is wrong, not the customer's request). Nothing was created upstream.
	ErrRoute = errors.New("upstream does not serve this model for this credential")
	// ErrOutOfCredit: the provider says the credential's account has no credit left (OpenAI 429
	// insufficient_quota, Ark AccountOverdueError). Like ErrAuth the credential takes no new task until an
	// operator reloads it, and the call is retried later; staff see "out of credit", not "key refused".
	ErrOutOfCredit = errors.New("upstream account out of credit")
	// ErrNotCancellable: the provider cannot stop the task in its state (Ark cancels only queued tasks) or
	// has no way to cancel at all.
	ErrNotCancellable = errors.New("upstream cannot cancel the task")
	// ErrNotSent: the submission was not made (the credential's circuit breaker is open). It wraps
	// ErrTransient.
	ErrNotSent = fmt.Errorf("%w: submission not sent, circuit breaker open", ErrTransient)
)

// Provider is one upstream protocol at one base URL. Every call names the credential: a task's
// submission, polls and download all use the credential it was submitted with.
type Provider interface {
	Submit(ctx context.Context, cred Credential, req SubmitRequest) (Status, error)
	Poll(ctx context.Context, cred Credential, upstreamID string) (Status, error)
	// Download streams the finished video; size is its length in bytes, or -1 when the upstream did not say.
	Download(ctx context.Context, cred Credential, upstreamID string) (body io.ReadCloser, size int64, err error)
}

// BusyError is a 429 that is not about credit: the credential is at a rate or concurrency limit. It
// counts towards the circuit breaker and the call waits at least RetryAfter (zero: the provider did not
// say) before it is made again.
type BusyError struct {
	RetryAfter time.Duration
	Detail     string
}

func (e *BusyError) Error() string { return "upstream credential busy: " + e.Detail }

// Unwrap lets errors.Is(err, ErrBusy) match.
func (e *BusyError) Unwrap() error { return ErrBusy }

// RetryAfter is how long err asks the caller to wait before calling again (zero: no such request).
func RetryAfter(err error) time.Duration {
	var b *BusyError
	if errors.As(err, &b) {
		return b.RetryAfter
	}
	return 0
}

// Canceller is a provider that can stop a task we gave up on (run timeout, account disabled, the
// customer's cancel), so that nobody pays for work nobody collects.
type Canceller interface {
	// Cancel asks the provider to stop the task. ErrNotCancellable means it cannot in the task's state;
	// ErrUnknownTask that it no longer knows it.
	Cancel(ctx context.Context, cred Credential, upstreamID string) error
}

// CancelWindow is a Canceller that knows, before it is asked, in which of our task statuses its
// provider can stop a task (Ark: while it is queued there), so that a console offers Cancel only where
// a cancel can succeed.
type CancelWindow interface {
	CancelsWhile(status string) bool
}

// LastFrameSource is a provider that returns the video's last frame as an image (Ark's
// return_last_frame), served as the last_frame variant of the content.
type LastFrameSource interface {
	DownloadLastFrame(ctx context.Context, cred Credential, upstreamID string) (body io.ReadCloser, contentType string, size int64, err error)
}

// StillSource is a provider that serves still images of a finished task besides its video: the
// thumbnail and spritesheet variants of OpenAI's content endpoint (internal/domain/stills). The worker copies
// them with the video; for providers without them it makes its own (docs/api.md#variants).
type StillSource interface {
	// DownloadStill streams the variant; contentType is the image type the provider gave, size its
	// length in bytes or -1.
	DownloadStill(ctx context.Context, cred Credential, upstreamID, variant string) (body io.ReadCloser, contentType string, size int64, err error)
}

// RejectedError is an upstream's final refusal of a task, with its reason.
type RejectedError struct {
	Status  int
	Code    string
	Message string
	// Policy is true when the provider refused the content (its content policy), not the parameters.
	Policy bool
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("upstream rejected the task: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap lets errors.Is(err, ErrRejected) match.
func (e *RejectedError) Unwrap() error { return ErrRejected }
