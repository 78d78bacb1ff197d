// Package openai is the upstream adapter for kind openai: OpenAI's Videos API (and the OpenAI-compatible
// providers that serve it since OpenAI's own was scheduled to shut down), spoken through OpenAI's Go SDK
// with exactly the fields OpenAI's published spec accepts (docs/upstreams.md#openai).
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/upstream"
	"videogen/internal/infra/imagefit"
)

// What OpenAI's create accepts (openapi.yaml, VideoSeconds and VideoSize, as kept in testdata/):
// anything else is refused here, before a call OpenAI would refuse after we had billed the customer.
var (
	allowedSeconds = []int{4, 8, 12}
	allowedSizes   = []string{"720x1280", "1280x720", "1024x1792", "1792x1024"}
)

// Client calls one OpenAI-compatible base URL with each credential's key.
type Client struct {
	base    string
	http    *http.Client // pooled, shared by every credential and call
	fetch   *http.Client // reads first frames from our own signed URLs, without credentials
	timeout time.Duration
}

// New returns the adapter for base, the provider's host without /v1 (https://api.openai.com, or a
// compatible provider's). timeout bounds submit and poll calls, first frame upload included; downloads
// are bounded by their context only, since a video may take a while to stream.
func New(base string, timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	tr.ResponseHeaderTimeout = timeout
	// A redirect reaches the adapter instead of being followed: the SDK refuses to follow one to another
	// host (it guards the key), and a provider may serve its content from object storage elsewhere,
	// which the adapter then fetches without the key (content).
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client{base: base, http: &http.Client{Transport: tr, CheckRedirect: noRedirect}, fetch: &http.Client{Transport: tr}, timeout: timeout}
}

// videos is the SDK's Videos service for one call with cred. The SDK's own retries are off: the worker
// owns retries, with the task's idempotency key and its backoff. The service, unlike the SDK's client,
// reads no OPENAI_* variable from the environment, so only the operator's upstreams file configures it.
func (c *Client) videos(cred upstream.Credential) sdk.VideoService {
	base := cred.BaseURL
	if base == "" {
		base = c.base
	}
	return sdk.NewVideoService(
		option.WithBaseURL(strings.TrimRight(base, "/")+"/v1/"),
		option.WithAPIKey(cred.Secret),
		option.WithHTTPClient(c.http),
		option.WithMaxRetries(0),
	)
}

// jsonBody is CreateVideoJsonBody (openapi.yaml) as we fill it: only these fields ever leave.
type jsonBody struct {
	Model   string `json:"model,omitempty"`
	Prompt  string `json:"prompt"`
	Seconds string `json:"seconds"`
	Size    string `json:"size"`
}

// Submit creates the video job: as JSON (CreateVideoJsonBody) for a prompt alone, as the multipart form
// (CreateVideoMultipartBody) with the first frame streamed as input_reference when there is one.
func (c *Client) Submit(ctx context.Context, cred upstream.Credential, req upstream.SubmitRequest) (upstream.Status, error) {
	params, err := newParams(req)
	if err != nil {
		return upstream.Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var raw *http.Response
	opts := []option.RequestOption{option.WithResponseInto(&raw)}
	if req.IdempotencyKey != "" {
		// OpenAI does not document the header for videos; compatible providers and the simulator that
		// honour it find the first job when the worker repeats a submission with no clear answer.
		opts = append(opts, option.WithHeader("Idempotency-Key", req.IdempotencyKey))
	}
	conformed := ""
	if req.StartImageURL == "" {
		b, err := json.Marshal(jsonBody{Model: string(params.Model), Prompt: params.Prompt, Seconds: string(params.Seconds), Size: string(params.Size)})
		if err != nil {
			return upstream.Status{}, fmt.Errorf("encode the create body: %w", err)
		}
		opts = append(opts, option.WithRequestBody("application/json", b))
	} else {
		form, err := c.streamForm(ctx, params, req.StartImageURL, req.UpstreamSize)
		if err != nil {
			return upstream.Status{}, err
		}
		defer form.Close()
		opts = append(opts, option.WithRequestBody(form.contentType, form))
		conformed = form.conformed
	}
	svc := c.videos(cred)
	v, err := svc.New(ctx, params, opts...)
	if err != nil {
		return upstream.Status{}, classify("create", err, raw, false)
	}
	st, err := status(v)
	st.Conformed = conformed
	return st, err
}

// newParams checks that req is what OpenAI's create takes and returns its fields. The platform's
// capability check refuses what the route cannot render before billing; a request that still reaches
// here with more is refused without calling OpenAI. aspect_ratio (implied by the size), generate_audio
// (Sora always renders sound), watermark and seed (OpenAI has no such field) are left out, not refused.
func newParams(req upstream.SubmitRequest) (sdk.VideoNewParams, error) {
	for _, in := range upstream.RequestInputs(req.VideoRequest) {
		if in != upstream.InputFirstFrame {
			return sdk.VideoNewParams{}, fmt.Errorf("%w: OpenAI's Videos API takes a first frame (input_reference) and no other media; this task has %s", upstream.ErrRejected, in)
		}
	}
	if !contains(allowedSeconds, req.Seconds) {
		return sdk.VideoNewParams{}, fmt.Errorf("%w: OpenAI's Videos API renders 4, 8 or 12 seconds, not %d", upstream.ErrRejected, req.Seconds)
	}
	if !contains(allowedSizes, req.UpstreamSize) {
		return sdk.VideoNewParams{}, fmt.Errorf("%w: OpenAI's Videos API renders %s, not size %q", upstream.ErrRejected, strings.Join(allowedSizes, ", "), req.UpstreamSize)
	}
	model := req.UpstreamModel
	if model == "" {
		model = req.Model
	}
	return sdk.VideoNewParams{Prompt: req.Prompt, Model: sdk.VideoModel(model),
		Seconds: sdk.VideoSeconds(strconv.Itoa(req.Seconds)), Size: sdk.VideoSize(req.UpstreamSize)}, nil
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// form is a multipart body written as it is read: the first frame goes from our media store to the
// provider without ever being held whole in memory.
type form struct {
	*io.PipeReader
	contentType string
	conformed   string // what was done to the first frame to fit the video's size, if anything
}

// streamForm opens the first frame at url (a signed URL of our own media; no credential is sent) and
// returns the create form, the SDK's own encoding of params with the frame as input_reference, piped.
// The SDK (v3.96.0) would read an io.Reader given as input_reference whole into a buffer before
// sending (VideoNewParams.MarshalMultipart); handing it the piped form as the request body instead
// streams it. A frame that cannot be read is ErrTransient: the worker signs the task's media afresh for
// its next attempt.
//
// Sora takes a first frame only at the video's size ("Inpaint image must match the requested width and
// height"): a frame of another size is scaled to cover the size and centre-cropped to it
// (internal/infra/imagefit), one decoded frame in memory, the PNG streamed as it is encoded.
func (c *Client) streamForm(ctx context.Context, params sdk.VideoNewParams, url, size string) (*form, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: the first frame's URL: %v", upstream.ErrTransient, err)
	}
	resp, err := c.fetch.Do(r)
	if err != nil {
		return nil, fmt.Errorf("%w: read the first frame: %v", upstream.ErrTransient, err)
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: read the first frame: HTTP %d", upstream.ErrTransient, resp.StatusCode)
	}
	ctype := imageType(resp.Header.Get("Content-Type"), r.URL.Path)
	var w, h int
	if _, err := fmt.Sscanf(size, "%dx%d", &w, &h); err != nil {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: size %q is not WIDTHxHEIGHT", upstream.ErrRejected, size)
	}
	fitted, err := imagefit.Cover(resp.Body, ctype, w, h)
	if err != nil {
		_ = resp.Body.Close()
		return nil, &upstream.RejectedError{Status: http.StatusBadRequest, Code: "first_frame_unreadable", Message: "the first frame could not be read as an image: " + err.Error()}
	}
	conformed := ""
	if fitted.From != "" {
		conformed = fmt.Sprintf("first frame cropped to %s (from %s) to match the video's size", size, fitted.From)
	}
	ctype = fitted.ContentType
	params.InputReference = sdk.VideoNewParamsInputReferenceUnion{OfFile: sdk.File(fitted.Body, "first_frame"+extension(ctype), ctype)}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := params.MarshalMultipartTo(mw)
		if err == nil {
			err = mw.Close()
		}
		_ = fitted.Body.Close() // ends the encoder of a cropped frame, whether or not it was read out
		_ = resp.Body.Close()
		pw.CloseWithError(err)
	}()
	return &form{PipeReader: pr, contentType: mw.FormDataContentType(), conformed: conformed}, nil
}

// imageType is the first frame's media type: as our media store served it, else from its name.
func imageType(header, urlPath string) string {
	if t, _, err := mime.ParseMediaType(header); err == nil && strings.HasPrefix(t, "image/") {
		return t
	}
	switch strings.ToLower(path.Ext(urlPath)) {
	case ".png":
		return "image/png"
	case ".webp":
		return "image/webp"
	default:
		return "image/jpeg"
	}
}

func extension(contentType string) string {
	switch contentType {
	case "image/png":
		return ".png"
	case "image/webp":
		return ".webp"
	default:
		return ".jpg"
	}
}

// Poll reads the video job.
func (c *Client) Poll(ctx context.Context, cred upstream.Credential, id string) (upstream.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var raw *http.Response
	svc := c.videos(cred)
	v, err := svc.Get(ctx, id, option.WithResponseInto(&raw))
	if err != nil {
		return upstream.Status{}, classify("poll", err, raw, true)
	}
	return status(v)
}

// Download streams the finished video.
func (c *Client) Download(ctx context.Context, cred upstream.Credential, id string) (io.ReadCloser, int64, error) {
	resp, err := c.content(ctx, cred, id, sdk.VideoDownloadContentParamsVariantVideo)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// DownloadStill streams the thumbnail or spritesheet OpenAI makes of the video (the variant query of
// GET /videos/{id}/content, VideoContentVariant).
func (c *Client) DownloadStill(ctx context.Context, cred upstream.Credential, id, variant string) (io.ReadCloser, string, int64, error) {
	resp, err := c.content(ctx, cred, id, sdk.VideoDownloadContentParamsVariant(variant))
	if err != nil {
		return nil, "", 0, err
	}
	return resp.Body, resp.Header.Get("Content-Type"), resp.ContentLength, nil
}

func (c *Client) content(ctx context.Context, cred upstream.Credential, id string, variant sdk.VideoDownloadContentParamsVariant) (*http.Response, error) {
	var raw *http.Response
	svc := c.videos(cred)
	resp, err := svc.DownloadContent(ctx, id, sdk.VideoDownloadContentParams{Variant: variant}, option.WithResponseInto(&raw))
	if err != nil {
		return nil, classify("download "+string(variant), err, raw, true)
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return c.redirected(ctx, resp, variant)
	}
	return resp, nil
}

// redirected follows a content answer that points elsewhere (a provider's object storage), without the
// key: the URL is the provider's grant. One that no longer serves the file (an expired signature) is
// ErrUnknownTask, as the provider no longer has it for us; the URL, which may carry a signature, is
// never put in an error.
func (c *Client) redirected(ctx context.Context, resp *http.Response, variant sdk.VideoDownloadContentParamsVariant) (*http.Response, error) {
	_ = resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("download %s: %w: HTTP %d without a usable Location", variant, upstream.ErrTransient, resp.StatusCode)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w: bad Location", variant, upstream.ErrTransient)
	}
	out, err := c.fetch.Do(r)
	if err != nil {
		return nil, fmt.Errorf("download %s from %s: %w: %v", variant, loc.Host, upstream.ErrTransient, errors.Unwrap(err))
	}
	switch {
	case out.StatusCode == http.StatusOK:
		return out, nil
	case out.StatusCode == http.StatusForbidden || out.StatusCode == http.StatusNotFound || out.StatusCode == http.StatusGone:
		_ = out.Body.Close()
		return nil, fmt.Errorf("download %s from %s: %w: HTTP %d", variant, loc.Host, upstream.ErrUnknownTask, out.StatusCode)
	default:
		_ = out.Body.Close()
		return nil, fmt.Errorf("download %s from %s: %w: HTTP %d", variant, loc.Host, upstream.ErrTransient, out.StatusCode)
	}
}

// status maps a Video object (VideoResource) onto ours.
func status(v *sdk.Video) (upstream.Status, error) {
	st := upstream.Status{ID: v.ID, State: string(v.Status), Progress: int(v.Progress)}
	switch v.Status {
	case sdk.VideoStatusQueued, sdk.VideoStatusInProgress, sdk.VideoStatusCompleted, sdk.VideoStatusFailed:
	default:
		return upstream.Status{}, fmt.Errorf("%w: video %s has status %q", upstream.ErrTransient, v.ID, v.Status)
	}
	if v.Status == sdk.VideoStatusCompleted {
		st.Progress = 100
	}
	if v.Error.Code != "" || v.Error.Message != "" {
		st.ErrorCode, st.ErrorMessage = v.Error.Code, v.Error.Message
		st.PolicyFailure = v.Status == sdk.VideoStatusFailed && policyCode(v.Error.Code)
	}
	if s, err := strconv.ParseFloat(string(v.Seconds), 64); err == nil {
		st.Rendered.Seconds = s
	}
	st.Rendered.Size = string(v.Size)
	return st, nil
}

// classify maps a failed SDK call onto the error the worker acts on, as OpenAI documents its answers
// (docs/upstreams.md#openai-errors). onTask is true for calls about an existing job, where 404 means the
// provider does not know it; on create a 404 means it does not serve the model for this key. raw is
// the answer, when there was one: the SDK returns a plain decoding error, not an *sdk.Error, for an
// error answer whose body is not OpenAI's JSON (a proxy's 502 page).
func classify(call string, err error, raw *http.Response, onTask bool) error {
	var apiErr *sdk.Error
	code, typ, msg := "", "", ""
	statusCode := 0
	var header http.Header
	switch {
	case errors.As(err, &apiErr):
		code, typ, msg, statusCode = apiErr.Code, apiErr.Type, apiErr.Message, apiErr.StatusCode
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
	case raw != nil && raw.StatusCode >= 400:
		statusCode, header = raw.StatusCode, raw.Header
	default:
		// No answer (connection refused, reset, timeout) or an unreadable one: the call may or may not
		// have reached the provider, so its outcome is unknown. The SDK's errors name the URL only.
		return fmt.Errorf("%s: %w: %v", call, upstream.ErrTransient, err)
	}
	detail := fmt.Sprintf("%s: HTTP %d %s: %s", call, statusCode, firstOf(code, typ), msg)
	switch {
	case statusCode == http.StatusTooManyRequests && outOfCredit(code, typ):
		return fmt.Errorf("%w: %s", upstream.ErrOutOfCredit, detail)
	case statusCode == http.StatusTooManyRequests:
		return &upstream.BusyError{RetryAfter: upstream.ParseRetryAfter(header, time.Now()), Detail: detail}
	case statusCode == http.StatusUnauthorized || statusCode == http.StatusForbidden:
		// The provider's message is left out: OpenAI's quotes the start and end of the key it refused.
		return fmt.Errorf("%s: %w: HTTP %d %s", call, upstream.ErrAuth, statusCode, firstOf(code, typ))
	case statusCode == http.StatusNotFound && onTask:
		return fmt.Errorf("%w: %s", upstream.ErrUnknownTask, detail)
	case statusCode == http.StatusNotFound:
		return fmt.Errorf("%w: %s", upstream.ErrRoute, detail)
	case statusCode == http.StatusRequestTimeout || statusCode == http.StatusConflict || statusCode >= 500:
		return fmt.Errorf("%w: %s", upstream.ErrTransient, detail)
	case statusCode >= 400:
		return &upstream.RejectedError{Status: statusCode, Code: firstOf(code, typ), Message: msg, Policy: policyCode(code)}
	default:
		return fmt.Errorf("%w: unexpected %s", upstream.ErrTransient, detail)
	}
}

// outOfCredit reports whether a 429 says the account has no credit left rather than that it is sending
// too fast: error.code insufficient_quota, or the billing codes OpenAI now sends under error.type
// insufficient_quota (credit_balance_exhausted, the spend and usage limits).
func outOfCredit(code, typ string) bool {
	return code == "insufficient_quota" || typ == "insufficient_quota"
}

// policyCode reports whether an error code says the content broke the provider's content policy:
// OpenAI's Videos API fails such jobs with moderation_blocked; its older endpoints refuse with
// content_policy_violation.
func policyCode(code string) bool {
	return code == "moderation_blocked" || code == "content_policy_violation"
}

func firstOf(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}
