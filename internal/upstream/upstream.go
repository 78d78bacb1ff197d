// Package upstream is how videogen talks to the providers that generate videos: a small Provider
// interface, the pool of credentials tasks are submitted with, and the errors every provider maps to.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"

	"videogen/models"
)

// Upstream task states, as providers report them.
const (
	StateQueued     = "queued"
	StateInProgress = "in_progress"
	StateCompleted  = "completed"
	StateFailed     = "failed"
)

// Credential is one upstream account key. Its secret lives only in memory, read from the environment.
type Credential struct {
	ID             string // stable across restarts; stored on tasks
	Label          string
	Secret         string
	MaxConcurrency int
}

// SubmitRequest is a task as sent upstream: its video request and the key that makes a repeated
// submission find the first one instead of starting another.
type SubmitRequest struct {
	models.VideoRequest
	IdempotencyKey string
}

// Status is an upstream task's state.
type Status struct {
	ID           string
	State        string
	Progress     int
	ErrorCode    string
	ErrorMessage string
}

// Errors every provider maps its failures to; the worker decides by them.
var (
	// ErrRejected: the upstream refused the task for good (a 4xx about the request). The task fails.
	ErrRejected = errors.New("upstream rejected the task")
	// ErrTransient: timeout, connection failure or 5xx. The outcome is unknown; retry the same call.
	ErrTransient = errors.New("upstream temporarily unavailable")
	// ErrBusy: the credential is at its concurrency limit upstream. Retry later, same credential.
	ErrBusy = errors.New("upstream credential busy")
	// ErrUnknownTask: the upstream does not know this task id for this credential.
	ErrUnknownTask = errors.New("upstream does not know the task")
)

// Provider is one upstream protocol. Every call names the credential: a task's submission, polls and
// download all use the credential it was submitted with.
type Provider interface {
	Name() string
	Submit(ctx context.Context, cred Credential, req SubmitRequest) (Status, error)
	Poll(ctx context.Context, cred Credential, upstreamID string) (Status, error)
	// Download streams the finished video; size is its length in bytes, or -1 when the upstream did not say.
	Download(ctx context.Context, cred Credential, upstreamID string) (body io.ReadCloser, size int64, err error)
}

// RejectedError is an upstream's final refusal of a task, with its reason.
type RejectedError struct {
	Status  int
	Code    string
	Message string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("upstream rejected the task: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Unwrap lets errors.Is(err, ErrRejected) match.
func (e *RejectedError) Unwrap() error { return ErrRejected }
