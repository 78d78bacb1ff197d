package ark

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"videogen/internal/domain/upstream"
)

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wireTask is the answer of GET /contents/generations/tasks/{id} (the fields we use; Ark sends more).
// The rendered parameters are pointers: absent is "not reported", never zero.
type wireTask struct {
	ID      string     `json:"id"`
	Model   string     `json:"model"`
	Status  string     `json:"status"`
	Error   *wireError `json:"error"`
	Content struct {
		VideoURL     string `json:"video_url"`
		LastFrameURL string `json:"last_frame_url"`
	} `json:"content"`
	Usage struct {
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
	Seed            *int64   `json:"seed"`
	Resolution      string   `json:"resolution"`
	Ratio           string   `json:"ratio"`
	Duration        *float64 `json:"duration"`
	FramesPerSecond *float64 `json:"framespersecond"`
}

// Poll reads the task's state. Ark reports no progress: a task reads 0 until it succeeds, then 100.
func (c *Client) Poll(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, error) {
	st, _, err := c.get(ctx, cred, id)
	return st, err
}

func (c *Client) get(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, wireTask, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.taskURL(id), nil)
	if err != nil {
		return upstream.Status{}, wireTask{}, fmt.Errorf("ark: build poll: %w", err)
	}
	resp, err := c.call(r, cred)
	if err != nil {
		return upstream.Status{}, wireTask{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return upstream.Status{}, wireTask{}, classify(resp, callTask)
	}
	var t wireTask
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&t); err != nil {
		return upstream.Status{}, wireTask{}, fmt.Errorf("ark poll: %w: unreadable answer (%v)", upstream.ErrTransient, err)
	}
	st, err := status(t)
	return st, t, err
}

func (c *Client) taskURL(id string) string {
	return c.base + "/contents/generations/tasks/" + url.PathEscape(id)
}

// status maps an Ark task onto ours.
func status(t wireTask) (upstream.Status, error) {
	st := upstream.Status{ID: t.ID, Usage: upstream.Usage{CompletionTokens: t.Usage.CompletionTokens, TotalTokens: t.Usage.TotalTokens}}
	switch t.Status {
	case statusQueued:
		st.State = upstream.StateQueued
	case statusRunning:
		st.State = upstream.StateInProgress
	case statusSucceeded:
		st.State, st.Progress = upstream.StateCompleted, 100
		st.Rendered = rendered(t)
	case statusFailed, statusCancelled, statusExpired:
		st.State = upstream.StateFailed
		// A cancelled or expired task may carry no error: its status is then the reason.
		st.ErrorCode, st.ErrorMessage = t.Status, "the upstream task ended "+t.Status
		if t.Error != nil && t.Error.Code != "" {
			st.ErrorCode, st.ErrorMessage = t.Error.Code, t.Error.Message
		}
		st.PolicyFailure = policyCode(st.ErrorCode)
	default:
		// A status this adapter does not know is most likely a new intermediate one: poll again.
		return upstream.Status{}, fmt.Errorf("ark: task %s has status %q: %w", t.ID, t.Status, upstream.ErrTransient)
	}
	return st, nil
}

// rendered is what a succeeded task reports it rendered: seed, resolution, ratio, duration and frame
// rate. Ark reports no pixel size; Size is the one the task's model renders for the reported resolution
// and ratio (its row in Models: Seedance 1.0 renders 1920x1088 for 1080p 16:9, 2.0 1920x1080), else
// the catalog's, and stays empty for a pair outside both.
func rendered(t wireTask) upstream.Rendered {
	r := upstream.Rendered{Seed: t.Seed, Resolution: t.Resolution, Ratio: t.Ratio}
	if t.Duration != nil {
		r.Seconds = *t.Duration
	}
	if t.FramesPerSecond != nil {
		r.FPS = int(*t.FramesPerSecond)
	}
	if t.Resolution != "" && t.Ratio != "" {
		r.Size = Models[t.Model].Sizes[t.Resolution][t.Ratio]
		if r.Size == "" {
			r.Size = sizeOf(t.Resolution, t.Ratio)
		}
	}
	return r
}
