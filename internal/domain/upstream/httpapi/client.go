// Package httpapi is the upstream adapter for providers that speak an OpenAI-style /v1/videos protocol
// (and for the built-in simulator, which speaks the same by default): Bearer credential,
// Idempotency-Key on submit, the video streamed from GET /v1/videos/{id}/content.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"videogen/internal/domain/upstream"
)

// Client calls one upstream base URL.
type Client struct {
	name    string
	base    string
	http    *http.Client
	timeout time.Duration
}

// New returns an adapter for base (e.g. "https://api.example.com"). timeout bounds submit and poll
// calls; downloads are bounded by their context only, since a video may take a while to stream.
func New(name, base string, timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	tr.ResponseHeaderTimeout = timeout
	return &Client{name: name, base: strings.TrimRight(base, "/"), http: &http.Client{Transport: tr}, timeout: timeout}
}

// Name is the provider's name, the prefix of its credential ids.
func (c *Client) Name() string { return c.name }

type wireVideo struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Progress int    `json:"progress"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Submit creates the task upstream, carrying the idempotency key. The body is our video request with
// the provider's name for the model in place of the public alias.
func (c *Client) Submit(ctx context.Context, cred upstream.Credential, req upstream.SubmitRequest) (upstream.Status, error) {
	vr := req.VideoRequest
	if req.UpstreamModel != "" {
		vr.Model = req.UpstreamModel
	}
	body, err := json.Marshal(vr)
	if err != nil {
		return upstream.Status{}, fmt.Errorf("encode submit: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/videos", bytes.NewReader(body))
	if err != nil {
		return upstream.Status{}, fmt.Errorf("build submit: %w", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Idempotency-Key", req.IdempotencyKey)
	return c.doStatus(r, cred)
}

// Poll reads the task's state.
func (c *Client) Poll(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/videos/"+url.PathEscape(id), nil)
	if err != nil {
		return upstream.Status{}, fmt.Errorf("build poll: %w", err)
	}
	return c.doStatus(r, cred)
}

// Download streams the finished video.
func (c *Client) Download(ctx context.Context, cred upstream.Credential, id string) (io.ReadCloser, int64, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/videos/"+url.PathEscape(id)+"/content", nil)
	if err != nil {
		return nil, 0, fmt.Errorf("build download: %w", err)
	}
	resp, err := c.do(r, cred)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, 0, classify(resp, true)
	}
	return resp.Body, resp.ContentLength, nil
}

// DownloadStill streams a still of the finished video: GET .../content?variant=thumbnail|spritesheet.
func (c *Client) DownloadStill(ctx context.Context, cred upstream.Credential, id, variant string) (io.ReadCloser, string, int64, error) {
	u := c.base + "/v1/videos/" + url.PathEscape(id) + "/content?" + url.Values{"variant": {variant}}.Encode()
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", 0, fmt.Errorf("build %s download: %w", variant, err)
	}
	resp, err := c.do(r, cred)
	if err != nil {
		return nil, "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, "", 0, classify(resp, true)
	}
	return resp.Body, resp.Header.Get("Content-Type"), resp.ContentLength, nil
}

func (c *Client) do(r *http.Request, cred upstream.Credential) (*http.Response, error) {
	r.Header.Set("Authorization", "Bearer "+cred.Secret)
	resp, err := c.http.Do(r)
	if err != nil {
		// The request may or may not have reached the upstream: the caller must treat the outcome as unknown.
		return nil, fmt.Errorf("%s %s: %w: %v", r.Method, r.URL.Path, upstream.ErrTransient, err)
	}
	return resp, nil
}

func (c *Client) doStatus(r *http.Request, cred upstream.Credential) (upstream.Status, error) {
	resp, err := c.do(r, cred)
	if err != nil {
		return upstream.Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return upstream.Status{}, classify(resp, r.Method != http.MethodPost)
	}
	var v wireVideo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return upstream.Status{}, fmt.Errorf("%s %s: decode answer: %w: %v", r.Method, r.URL.Path, upstream.ErrTransient, err)
	}
	st := upstream.Status{ID: v.ID, State: v.Status, Progress: v.Progress}
	if v.Error != nil {
		st.ErrorCode, st.ErrorMessage = v.Error.Code, v.Error.Message
		st.PolicyFailure = st.State == upstream.StateFailed && policyCode(v.Error.Code)
	}
	switch st.State {
	case upstream.StateQueued, upstream.StateInProgress, upstream.StateCompleted, upstream.StateFailed:
	default:
		return upstream.Status{}, fmt.Errorf("upstream status %q: %w", st.State, upstream.ErrTransient)
	}
	return st, nil
}

// classify maps an upstream error answer to the error the worker acts on. onTask is true for calls
// about an existing task, where 404 means the upstream does not know it; on submit a 404 means it does
// not serve the model for this key.
func classify(resp *http.Response, onTask bool) error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&body)
	detail := fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, body.Error.Code, body.Error.Message)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s", upstream.ErrBusy, detail)
	case resp.StatusCode == http.StatusNotFound && onTask:
		return fmt.Errorf("%w: %s", upstream.ErrUnknownTask, detail)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusConflict || resp.StatusCode >= 500:
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// A bad credential is our configuration's fault, not the customer's: the credential is marked
		// unhealthy and the task kept for a retry once an operator fixed the key. The provider's message
		// is left out: OpenAI's quotes the start and end of the key it refused.
		return fmt.Errorf("%w: HTTP %d %s", upstream.ErrAuth, resp.StatusCode, body.Error.Code)
	case resp.StatusCode >= 400:
		return &upstream.RejectedError{Code: body.Error.Code, Message: body.Error.Message, Status: resp.StatusCode, Policy: policyCode(body.Error.Code)}
	default:
		return fmt.Errorf("%w: unexpected %s", upstream.ErrTransient, detail)
	}
}

// policyCode reports whether an error code says the content broke the provider's content policy:
// OpenAI's video API fails such jobs with moderation_blocked, its image API refuses with
// moderation_blocked and its older endpoints with content_policy_violation.
func policyCode(code string) bool {
	return code == "moderation_blocked" || code == "content_policy_violation"
}
