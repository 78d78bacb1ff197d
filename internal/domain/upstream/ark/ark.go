// Package ark is the upstream adapter for BytePlus ModelArk / Volcengine Ark video generation
// (Seedance models): POST {base}/contents/generations/tasks creates a task, GET …/tasks/{id} reads it,
// DELETE …/tasks/{id} cancels a queued one, and the finished video and its last frame are fetched from
// the presigned object-storage URLs the task answer carries (docs/upstreams.md#ark has the field,
// status and error tables and the sources they were checked against).
package ark

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/upstream"
)

// Ark's task statuses.
const (
	statusQueued    = "queued"
	statusRunning   = "running"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusCancelled = "cancelled"
	statusExpired   = "expired"
)

// Content item roles, as Ark names them.
const (
	roleFirstFrame     = "first_frame"
	roleLastFrame      = "last_frame"
	roleReferenceImage = "reference_image"
	roleReferenceVideo = "reference_video"
	roleReferenceAudio = "reference_audio"
)

// Bounds on what is read from Ark: a task answer is a few hundred bytes, an error body less.
const (
	maxAnswer = 1 << 20
	maxError  = 64 << 10
)

// The bounds Ark puts on execution_expires_after, in seconds (BytePlus ModelArk "Create a video
// generation task": 3600 to 259200, default 172800). A task still unfinished then ends expired.
const (
	MinExpiresAfter = 3600
	MaxExpiresAfter = 259200
)

// Client calls one Ark base URL (e.g. "https://ark.ap-southeast.bytepluses.com/api/v3").
type Client struct {
	base    string
	timeout time.Duration
	api     *http.Client
	// files fetches the presigned video and last-frame URLs. It is a separate client so that nothing
	// configured for the API (and above all the credential) can ever travel to the object-storage host.
	files *http.Client
}

// New returns an Ark adapter for baseURL, the path prefix up to and including /api/v3. timeout bounds
// submit, poll and cancel calls; a download is bounded by its context only, since a video may take a while.
func New(baseURL string, timeout time.Duration) *Client {
	api := http.DefaultTransport.(*http.Transport).Clone()
	api.MaxIdleConnsPerHost = 32
	api.ResponseHeaderTimeout = timeout
	files := http.DefaultTransport.(*http.Transport).Clone()
	files.ResponseHeaderTimeout = timeout
	return &Client{
		base:    strings.TrimRight(baseURL, "/"),
		timeout: timeout,
		api:     &http.Client{Transport: api},
		files:   &http.Client{Transport: files},
	}
}

// The optional provider interfaces Ark supports: cancelling a queued task, and the last frame.
var (
	_ upstream.Canceller       = (*Client)(nil)
	_ upstream.LastFrameSource = (*Client)(nil)
)

type mediaURL struct {
	URL string `json:"url"`
}

type contentItem struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *mediaURL `json:"image_url,omitempty"`
	VideoURL *mediaURL `json:"video_url,omitempty"`
	AudioURL *mediaURL `json:"audio_url,omitempty"`
	Role     string    `json:"role,omitempty"`
}

// createRequest is the body of POST /contents/generations/tasks. generate_audio and watermark are
// always sent: Ark's defaults differ between model versions, and the customer chose. ratio is always
// sent too: Ark's default for a task with a first frame is "adaptive" (the image's ratio), but our
// API's default is 16:9 whatever the inputs. return_last_frame is always asked for: the last frame is
// served beside the video, and Ark returns it only when asked.
type createRequest struct {
	Model                 string        `json:"model"`
	Content               []contentItem `json:"content"`
	Resolution            string        `json:"resolution,omitempty"`
	Ratio                 string        `json:"ratio,omitempty"`
	Duration              int           `json:"duration,omitempty"`
	GenerateAudio         bool          `json:"generate_audio"`
	Watermark             bool          `json:"watermark"`
	Seed                  *int64        `json:"seed,omitempty"`
	ReturnLastFrame       bool          `json:"return_last_frame"`
	ExecutionExpiresAfter int64         `json:"execution_expires_after,omitempty"`
}

// Submit creates the task. Ark has no idempotency key: a submission retried after a lost answer
// creates a second upstream task, which we pay for and never follow (docs/upstreams.md#idempotency).
func (c *Client) Submit(ctx context.Context, cred upstream.Credential, req upstream.SubmitRequest) (upstream.Status, error) {
	body, err := createBody(req)
	if err != nil {
		return upstream.Status{}, err
	}
	b, err := json.Marshal(body)
	if err != nil {
		return upstream.Status{}, fmt.Errorf("ark: encode submit: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/contents/generations/tasks", bytes.NewReader(b))
	if err != nil {
		return upstream.Status{}, fmt.Errorf("ark: build submit: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.call(r, cred)
	if err != nil {
		return upstream.Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return upstream.Status{}, classify(resp, callSubmit)
	}
	var created struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&created); err != nil || created.ID == "" {
		// The task may exist upstream: the outcome is unknown, as for a timeout.
		return upstream.Status{}, fmt.Errorf("ark submit: %w: unreadable answer (%v)", upstream.ErrTransient, err)
	}
	// The create answer carries only the id; a new task is queued.
	return upstream.Status{ID: created.ID, State: upstream.StateQueued}, nil
}

// createBody maps our request onto Ark's. Ark takes a resolution and a ratio, not pixels: both come
// from the size to ask for (SubmitRequest.UpstreamSize, which a route's size map may have changed)
// through the catalog's table of Seedance's sizes; a size outside the table falls back to the public
// alias's resolution and the request's ratio.
func createBody(req upstream.SubmitRequest) (createRequest, error) {
	m, ok := catalog.Lookup(req.Model)
	if !ok {
		return createRequest{}, fmt.Errorf("ark: model %q is not in the catalog, so its resolution is unknown", req.Model)
	}
	size := req.UpstreamSize
	if size == "" {
		size = req.Size
	}
	resolution, ratio, ok := resolutionOf(size)
	if !ok {
		resolution, ratio = m.Resolution, req.AspectRatio
	}
	if ratio == "" {
		ratio = catalog.DefaultRatio
	}
	model := req.UpstreamModel
	if model == "" {
		model = req.Model
	}
	out := createRequest{Model: model, Resolution: resolution, Ratio: ratio, Duration: req.Seconds,
		GenerateAudio: req.GenerateAudio, Watermark: req.Watermark, Seed: req.Seed,
		ReturnLastFrame: true, ExecutionExpiresAfter: expiresAfter(req.Expires)}
	if req.Prompt != "" {
		out.Content = append(out.Content, contentItem{Type: "text", Text: req.Prompt})
	}
	image := func(u, role string) {
		out.Content = append(out.Content, contentItem{Type: "image_url", ImageURL: &mediaURL{URL: u}, Role: role})
	}
	if req.StartImageURL != "" {
		image(req.StartImageURL, roleFirstFrame)
	}
	if req.EndImageURL != "" {
		image(req.EndImageURL, roleLastFrame)
	}
	for _, u := range req.ImageURLs {
		image(u, roleReferenceImage)
	}
	for _, u := range req.VideoURLs {
		out.Content = append(out.Content, contentItem{Type: "video_url", VideoURL: &mediaURL{URL: u}, Role: roleReferenceVideo})
	}
	for _, u := range req.AudioURLs {
		out.Content = append(out.Content, contentItem{Type: "audio_url", AudioURL: &mediaURL{URL: u}, Role: roleReferenceAudio})
	}
	return out, nil
}

// expiresAfter is execution_expires_after for a task we give up on after d: d in whole seconds
// (rounded up, so Ark never stops a task we still wait for), clamped to what Ark accepts. Zero (no
// bound configured) sends nothing, and Ark applies its default of 48 hours.
func expiresAfter(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	secs := int64((d + time.Second - 1) / time.Second)
	return min(max(secs, MinExpiresAfter), MaxExpiresAfter)
}

// resolutionOf finds the resolution and ratio whose Seedance size is size, in the catalog's table.
func resolutionOf(size string) (resolution, ratio string, ok bool) {
	seen := map[string]bool{}
	for _, m := range catalog.Models {
		if seen[m.Resolution] {
			continue
		}
		seen[m.Resolution] = true
		if r, ok := m.RatioOfSize(size); ok {
			return m.Resolution, r, true
		}
	}
	return "", "", false
}

// sizeOf is the pixel size Seedance renders for a resolution and ratio, from the catalog's table.
func sizeOf(resolution, ratio string) string {
	for _, m := range catalog.Models {
		if m.Resolution == resolution {
			s, _ := m.Size(ratio)
			return s
		}
	}
	return ""
}

func (c *Client) call(r *http.Request, cred upstream.Credential) (*http.Response, error) {
	r.Header.Set("Authorization", "Bearer "+cred.Secret)
	resp, err := c.api.Do(r)
	if err != nil {
		// The request may or may not have reached Ark: the caller must treat the outcome as unknown.
		return nil, fmt.Errorf("ark %s %s: %w: %v", r.Method, r.URL.Path, upstream.ErrTransient, cause(err))
	}
	return resp, nil
}
