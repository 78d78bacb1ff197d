// Package videos is the task domain of the API: it validates create requests, reserves funds and
// records tasks, and shows them as OpenAI-compatible video objects. It knows nothing of HTTP.
package videos

import (
	"strconv"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/money"
	"videogen/models"
)

// Video is the JSON object of a task: every key of OpenAI's video resource, null where unset, plus
// videogen's own fields (docs/design.md §5).
type Video struct {
	ID                 string      `json:"id"`
	Object             string      `json:"object"`
	Model              string      `json:"model"`
	Status             string      `json:"status"`
	Progress           int         `json:"progress"`
	CreatedAt          int64       `json:"created_at"`
	CompletedAt        *int64      `json:"completed_at"`
	ExpiresAt          *int64      `json:"expires_at"`
	Prompt             string      `json:"prompt"`
	Size               string      `json:"size"`
	Seconds            string      `json:"seconds"`
	RemixedFromVideoID *string     `json:"remixed_from_video_id"`
	Error              *VideoError `json:"error"`
	AspectRatio        string      `json:"aspect_ratio"`
	GenerateAudio      bool        `json:"generate_audio"`
	Watermark          bool        `json:"watermark"`
	// Seed is the seed the provider reports it rendered with, else the one sent with the request; null
	// when neither is known, including when the route's provider takes no seed (docs/api.md).
	Seed    *int64  `json:"seed"`
	Billing Billing `json:"billing"`
}

// VideoError says why a task failed.
type VideoError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Billing is the task's charge and where its reservation stands.
type Billing struct {
	Amount   money.Micros `json:"amount"`
	Currency string       `json:"currency"`
	State    string       `json:"state"`
}

// ToVideo renders a task as its API object.
func ToVideo(t *models.Task) Video {
	v := Video{
		ID: t.ID, Object: "video", Model: t.Model, Status: t.Status, Progress: t.Progress,
		CreatedAt: t.CreatedAt.Unix(), Prompt: t.Prompt, Size: t.Size, Seconds: strconv.Itoa(t.Seconds),
		AspectRatio: t.AspectRatio, GenerateAudio: t.GenerateAudio, Watermark: t.Watermark, Seed: t.Seed,
		Billing:            Billing{Amount: money.Micros(t.AmountMicros), Currency: "usd", State: t.BillingState},
		RemixedFromVideoID: t.RemixedFromVideoID,
	}
	if t.RenderedSeed != nil && *t.RenderedSeed >= 0 && *t.RenderedSeed <= MaxSeed {
		v.Seed = t.RenderedSeed // a seed outside the API's range is kept for staff, not echoed
	}
	if t.CompletedAt != nil {
		v.CompletedAt = unix(*t.CompletedAt)
	}
	if t.ExpiresAt != nil {
		v.ExpiresAt = unix(*t.ExpiresAt)
	}
	if t.Status == tasks.Failed {
		v.Error = &VideoError{Code: deref(t.ErrorCode), Message: deref(t.ErrorMessage)}
	}
	return v
}

// PollAfter is how long a client should wait before polling the task again: it grows with the task's
// age, as docs/api.md asks clients to back off (1 s for a new task, up to 15 s).
func PollAfter(t *models.Task, now time.Time) time.Duration { return pollAfter(t.CreatedAt, now) }

func pollAfter(created, now time.Time) time.Duration {
	d := now.Sub(created) / 5
	return min(max(d, time.Second), 15*time.Second).Round(100 * time.Millisecond)
}

func unix(t time.Time) *int64 {
	u := t.Unix()
	return &u
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
