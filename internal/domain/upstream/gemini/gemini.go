// Package gemini is the upstream adapter for Google's Veo models through the Gemini API, on Google's
// own Go SDK (google.golang.org/genai): POST {base}/v1beta/models/{model}:predictLongRunning starts a
// long-running operation, GET {base}/v1beta/{operation name} reads it until it is done, and the video
// is streamed from the file URI the finished operation carries (docs/upstreams.md#gemini has the field,
// state and error tables and the sources they were checked against).
package gemini

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"google.golang.org/genai"

	"videogen/internal/domain/upstream"
)

// DefaultBaseURL is the Gemini API's host, the base URL of a gemini credential.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// apiVersion is the Gemini API version the Veo models are served under (the SDK's default for the
// Gemini API backend, named so that a change of SDK default cannot move us silently).
const apiVersion = "v1beta"

// maxImage bounds one input image fetched from our media URLs: the SDK sends images inline (base64 in
// the JSON body), and the Gemini API refuses inline request bodies over 20 MB.
const maxImage = 20 << 20

// apiKeyHeader is how the Gemini API takes the key (the SDK sets it on every call; the docs' curl
// download of a video file sends it the same way).
const apiKeyHeader = "x-goog-api-key"

// Client speaks the Gemini API at one base URL, with one SDK client per credential and key.
type Client struct {
	base    *url.URL
	timeout time.Duration
	// api carries the SDK's calls; it records the Retry-After of every answer (see retryAfterOf).
	api *http.Client
	// files streams videos. It sends the key only to the base URL's host, and drops it on a redirect
	// to any other host (Go forwards custom headers across hosts).
	files *http.Client
	// media fetches our own signed input URLs: no credential ever goes there.
	media *http.Client

	mu      sync.Mutex
	clients map[string]*genai.Client // credential id + key digest → client
}

// New returns a Gemini adapter for baseURL (the host without /v1beta; DefaultBaseURL when empty).
// timeout bounds submit and poll calls; a download is bounded by its context only.
func New(baseURL string, timeout time.Duration) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || base.Host == "" {
		// The upstreams file checks base URLs before any adapter is built; this keeps a bad one from
		// sending anything anywhere.
		base = &url.URL{Scheme: "https", Host: "invalid.invalid"}
	}
	api := http.DefaultTransport.(*http.Transport).Clone()
	api.MaxIdleConnsPerHost = 32
	api.ResponseHeaderTimeout = timeout
	files := http.DefaultTransport.(*http.Transport).Clone()
	files.ResponseHeaderTimeout = timeout
	media := http.DefaultTransport.(*http.Transport).Clone()
	media.ResponseHeaderTimeout = timeout
	c := &Client{
		base:    base,
		timeout: timeout,
		api:     &http.Client{Transport: recorder{next: api}},
		media:   &http.Client{Transport: media, Timeout: 2 * time.Minute},
		clients: map[string]*genai.Client{},
	}
	c.files = &http.Client{Transport: files, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if !c.sameHost(r.URL) {
			r.Header.Del(apiKeyHeader)
		}
		return nil
	}}
	return c
}

// sdk returns the SDK client of the credential, built once per credential id and key. A reload that
// changes the key makes a new one; the SDK client holds nothing but its configuration.
func (c *Client) sdk(ctx context.Context, cred upstream.Credential) (*genai.Client, error) {
	if cred.Secret == "" {
		// The SDK would fall back to GEMINI_API_KEY or GOOGLE_API_KEY from the server's environment:
		// a credential is only ever its own key.
		return nil, fmt.Errorf("%w: gemini credential %s has no key", upstream.ErrAuth, cred.ID)
	}
	sum := sha256.Sum256([]byte(cred.Secret))
	key := cred.ID + "\x00" + hex.EncodeToString(sum[:8])
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.clients[key]; ok {
		return g, nil
	}
	// RetryOptions stays nil: the SDK then makes each call once, and the worker decides about retries
	// (a retried create would be a second paid generation).
	g, err := genai.NewClient(ctx, &genai.ClientConfig{
		APIKey:     cred.Secret,
		Backend:    genai.BackendGeminiAPI,
		HTTPClient: c.api,
		HTTPOptions: genai.HTTPOptions{
			BaseURL:    c.base.String() + "/",
			APIVersion: apiVersion,
		},
	})
	if err != nil {
		// NewClient fails only on configuration, and its messages print the whole configuration, key
		// included (ClientConfig %#v): none of it is kept.
		return nil, fmt.Errorf("gemini: the SDK refused the client configuration of %s", cred.ID)
	}
	c.clients[key] = g
	return g, nil
}

// Submit starts the operation. The Gemini API has no idempotency key: a submission retried after a
// lost answer starts a second operation (docs/upstreams.md#gemini).
func (c *Client) Submit(ctx context.Context, cred upstream.Credential, req upstream.SubmitRequest) (upstream.Status, error) {
	source, cfg, err := c.request(ctx, req)
	if err != nil {
		return upstream.Status{}, err
	}
	g, err := c.sdk(ctx, cred)
	if err != nil {
		return upstream.Status{}, err
	}
	model := req.UpstreamModel
	if model == "" {
		model = req.Model
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, ans := withAnswer(ctx)
	op, err := g.Models.GenerateVideosFromSource(ctx, model, source, cfg)
	if err != nil {
		return upstream.Status{}, classify(err, ans, "submit", false)
	}
	if op == nil || op.Name == "" {
		// The operation may exist upstream: the outcome is unknown, as for a timeout.
		return upstream.Status{}, fmt.Errorf("gemini submit: %w: the answer names no operation", upstream.ErrTransient)
	}
	return status(op)
}

// Poll reads the operation.
func (c *Client) Poll(ctx context.Context, cred upstream.Credential, name string) (upstream.Status, error) {
	st, _, err := c.get(ctx, cred, name)
	return st, err
}

func (c *Client) get(ctx context.Context, cred upstream.Credential, name string) (upstream.Status, *genai.GenerateVideosOperation, error) {
	g, err := c.sdk(ctx, cred)
	if err != nil {
		return upstream.Status{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx, ans := withAnswer(ctx)
	op, err := g.Operations.GetVideosOperation(ctx, &genai.GenerateVideosOperation{Name: name}, nil)
	if err != nil {
		return upstream.Status{}, nil, classify(err, ans, "poll", true)
	}
	st, err := status(op)
	return st, op, err
}

// Download reads the operation for its video's file URI and streams the video from it.
func (c *Client) Download(ctx context.Context, cred upstream.Credential, name string) (io.ReadCloser, int64, error) {
	st, op, err := c.get(ctx, cred, name)
	if err != nil {
		return nil, 0, err
	}
	uri := videoURI(op)
	if st.State != upstream.StateCompleted || uri == "" {
		return nil, 0, fmt.Errorf("gemini download %s: %w: the operation is %s and has no video yet", name, upstream.ErrTransient, st.State)
	}
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, 0, fmt.Errorf("gemini download %s: %w: the video URI is not an http(s) URL", name, upstream.ErrTransient)
	}
	if id := fileID.FindStringSubmatch(u.Path); id != nil {
		// A Gemini API file (…/files/{id}:download?alt=media) is fetched as the SDK's Files.Download
		// fetches it — {base}/{version}/files/{id}:download?alt=media on the configured base, with the
		// key — whatever host the URI names, so a credential behind a proxy base downloads through it.
		// (Files.Download itself reads the whole video into memory and never looks at the answer's
		// status; the path is the SDK's, the streaming ours.) A redirect elsewhere loses the key.
		u = c.base.JoinPath(apiVersion, "files", id[1]+":download")
		u.RawQuery = "alt=media"
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, fmt.Errorf("gemini: build download: %w", err)
	}
	if c.sameHost(u) {
		// The file is the Gemini API's own: it takes the key as every API call does. Another host (a
		// signed storage URL) never gets it.
		r.Header.Set(apiKeyHeader, cred.Secret)
	}
	resp, err := c.files.Do(r)
	if err != nil {
		return nil, 0, fmt.Errorf("gemini download %s from %s: %w: %v", name, u.Host, upstream.ErrTransient, cause(err))
	}
	if resp.StatusCode == http.StatusOK {
		return resp.Body, resp.ContentLength, nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	detail := fmt.Sprintf("gemini download %s from %s: HTTP %d", name, u.Host, resp.StatusCode)
	switch s := resp.StatusCode; {
	case (s == http.StatusUnauthorized || s == http.StatusForbidden) && c.sameHost(u):
		return nil, 0, fmt.Errorf("%s: %w", detail, upstream.ErrAuth)
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		// Another host refusing a URL it signed: the URL went stale, the key has nothing to do with it.
		return nil, 0, fmt.Errorf("%s: %w: the video URL expired", detail, upstream.ErrUnknownTask)
	case s == http.StatusNotFound || s == http.StatusGone:
		// Generated videos are kept two days on the Gemini API; after that the file is gone.
		return nil, 0, fmt.Errorf("%s: %w: the video file is gone", detail, upstream.ErrUnknownTask)
	case s == http.StatusTooManyRequests:
		return nil, 0, &upstream.BusyError{RetryAfter: upstream.ParseRetryAfter(resp.Header, time.Now()), Detail: detail}
	default:
		return nil, 0, fmt.Errorf("%s: %w", detail, upstream.ErrTransient)
	}
}

// Cancel cannot stop a Veo operation: the Gemini API documents no cancel method for the operations of
// models/*:predictLongRunning, and the SDK has none (its Operations only read them). The worker logs
// that the task could not be cancelled upstream (docs/upstreams.md#gemini).
func (c *Client) Cancel(ctx context.Context, cred upstream.Credential, name string) error {
	return fmt.Errorf("gemini cancel %s: %w: the Gemini API has no cancel for video operations", name, upstream.ErrNotCancellable)
}

// CancelsWhile: never (Cancel above).
func (c *Client) CancelsWhile(string) bool { return false }

// fileID finds a Gemini API file id in a video URI's path, as the SDK's tFileName does (files/[a-z0-9]+).
var fileID = regexp.MustCompile(`/files/([a-z0-9]+)(?::download)?$`)

// sameHost reports whether u is on the credential's base URL (scheme and host), where the key may go.
func (c *Client) sameHost(u *url.URL) bool {
	return strings.EqualFold(u.Scheme, c.base.Scheme) && strings.EqualFold(u.Host, c.base.Host)
}

// cause is a failed request's reason without its URL.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
