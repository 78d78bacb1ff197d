// Package ark is the upstream adapter for BytePlus ModelArk / Volcengine Ark video generation
// (Seedance models): POST {base}/contents/generations/tasks creates a task, GET …/tasks/{id} reads it,
// and the finished video is fetched from the presigned object-storage URL the task answer carries
// (docs/upstreams.md has the field and status tables and the sources they were checked against).
package ark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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

// Client calls one Ark base URL (e.g. "https://ark.ap-southeast.bytepluses.com/api/v3").
type Client struct {
	base    string
	timeout time.Duration
	api     *http.Client
	// files fetches the presigned video URLs. It is a separate client so that nothing configured for
	// the API (and above all the credential) can ever travel to the object-storage host.
	files *http.Client
}

// New returns an Ark adapter for baseURL, the path prefix up to and including /api/v3. timeout bounds
// submit and poll calls; a download is bounded by its context only, since a video may take a while.
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
// always sent: Ark's defaults differ between model versions, and the customer chose.
type createRequest struct {
	Model         string        `json:"model"`
	Content       []contentItem `json:"content"`
	Resolution    string        `json:"resolution,omitempty"`
	Ratio         string        `json:"ratio,omitempty"`
	Duration      int           `json:"duration,omitempty"`
	GenerateAudio bool          `json:"generate_audio"`
	Watermark     bool          `json:"watermark"`
	Seed          *int64        `json:"seed,omitempty"`
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// wireTask is the answer of GET /contents/generations/tasks/{id} (the fields we use; Ark sends more).
type wireTask struct {
	ID      string     `json:"id"`
	Model   string     `json:"model"`
	Status  string     `json:"status"`
	Error   *wireError `json:"error"`
	Content struct {
		VideoURL string `json:"video_url"`
	} `json:"content"`
	Usage struct {
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
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
		return upstream.Status{}, classify(resp, "submit", false)
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

// createBody maps our request onto Ark's. The resolution comes from the public alias (the catalog),
// not from the provider's model name, which names no resolution.
func createBody(req upstream.SubmitRequest) (createRequest, error) {
	m, ok := catalog.Lookup(req.Model)
	if !ok {
		return createRequest{}, fmt.Errorf("ark: model %q is not in the catalog, so its resolution is unknown", req.Model)
	}
	ratio := req.AspectRatio
	if ratio == "" {
		ratio, _ = m.RatioOfSize(req.Size)
	}
	model := req.UpstreamModel
	if model == "" {
		model = req.Model
	}
	out := createRequest{Model: model, Resolution: m.Resolution, Ratio: ratio, Duration: req.Seconds,
		GenerateAudio: req.GenerateAudio, Watermark: req.Watermark, Seed: req.Seed}
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

// Poll reads the task's state. Ark reports no progress: a task reads 0 until it succeeds, then 100.
func (c *Client) Poll(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, error) {
	st, _, err := c.get(ctx, cred, id)
	return st, err
}

func (c *Client) get(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/contents/generations/tasks/"+url.PathEscape(id), nil)
	if err != nil {
		return upstream.Status{}, "", fmt.Errorf("ark: build poll: %w", err)
	}
	resp, err := c.call(r, cred)
	if err != nil {
		return upstream.Status{}, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return upstream.Status{}, "", classify(resp, "poll", true)
	}
	var t wireTask
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&t); err != nil {
		return upstream.Status{}, "", fmt.Errorf("ark poll: %w: unreadable answer (%v)", upstream.ErrTransient, err)
	}
	st, err := status(t)
	return st, t.Content.VideoURL, err
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

// Download reads the task for its video URL and streams the video from it. The URL is presigned on
// another host (object storage): it is fetched without the credential, which must never go there.
func (c *Client) Download(ctx context.Context, cred upstream.Credential, id string) (io.ReadCloser, int64, error) {
	st, videoURL, err := c.get(ctx, cred, id)
	if err != nil {
		return nil, 0, err
	}
	if st.State != upstream.StateCompleted || videoURL == "" {
		return nil, 0, fmt.Errorf("ark download %s: %w: the task is %s and has no video yet", id, upstream.ErrTransient, st.State)
	}
	u, err := url.Parse(videoURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, 0, fmt.Errorf("ark download %s: %w: the task's video URL is not an http(s) URL", id, upstream.ErrTransient)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, videoURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("ark: build download: %w", err)
	}
	resp, err := c.files.Do(r)
	if err != nil {
		// The URL's query is its signature: name the host only.
		return nil, 0, fmt.Errorf("ark download %s from %s: %w: %v", id, u.Host, upstream.ErrTransient, cause(err))
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, resp.ContentLength, nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxError))
	detail := fmt.Sprintf("ark download %s from %s: HTTP %d", id, u.Host, resp.StatusCode)
	switch {
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		// The presigned URL expired (Ark keeps videos 24 hours) or the object is gone. This 403 is
		// object storage refusing a stale signature, not Ark refusing our credential.
		return nil, 0, fmt.Errorf("%s: %w: the video URL expired or the video is gone", detail, upstream.ErrUnknownTask)
	default:
		return nil, 0, fmt.Errorf("%s: %w", detail, upstream.ErrTransient)
	}
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

// cause is a failed request's reason without its URL, which for a presigned URL holds the signature.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// classify maps an Ark error answer to the error the worker acts on. onTask is true for calls about
// an existing task, where 404 means Ark does not know it; on submit a 404 is about the model
// (InvalidEndpointOrModel.NotFound, ModelNotOpen): the operator's route is wrong, not the request.
func classify(resp *http.Response, call string, onTask bool) error {
	var body struct {
		Error wireError `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, maxError)).Decode(&body)
	code, msg := body.Error.Code, body.Error.Message
	detail := fmt.Sprintf("ark %s: HTTP %d %s: %s", call, resp.StatusCode, code, msg)
	s := resp.StatusCode
	switch {
	case s == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s", upstream.ErrBusy, detail)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		// AuthenticationError, AccessDenied, AccountOverdueError: the key or its account, not the task.
		// Only the code is kept: a provider's message about a refused key may quote part of it.
		return fmt.Errorf("%w: ark %s: HTTP %d %s", upstream.ErrAuth, call, s, code)
	case s == http.StatusNotFound && onTask:
		return fmt.Errorf("%w: %s", upstream.ErrUnknownTask, detail)
	case s == http.StatusNotFound:
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case s == http.StatusRequestTimeout || s == http.StatusConflict || s >= 500:
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
