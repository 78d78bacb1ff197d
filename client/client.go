// Package client is a Go client for the videogen API (OpenAI-compatible /v1/videos): it uploads media,
// creates videos, waits for them at the pace the server asks for, downloads the MP4, lists and deletes
// them, and retries only requests that cannot cost the customer twice.
//
// A typical program:
//
//	c := client.New("https://api.example.com", os.Getenv("VIDEOGEN_API_KEY"))
//	v, err := c.Create(ctx, client.CreateParams{Model: "videogen-2.0-720p", Prompt: "a paper boat", Seconds: 5})
//	...
//	v, err = c.Wait(ctx, v.ID, nil)
//	...
//	n, err := c.Download(ctx, v.ID, file)
//
// # Errors
//
// Every answer the server refuses becomes an *APIError carrying the HTTP status, the stable error.code,
// the message, the request field at fault and the X-Request-Id to quote to support; use AsAPIError or
// ErrorCode to inspect it. A video that finished as failed makes Wait return a *VideoFailedError.
//
// # Retries
//
// Network errors, 5xx answers and 429 are retried with capped exponential backoff and jitter (or after
// the server's Retry-After), but only for requests that are safe to repeat: GET and DELETE, and
// POST /v1/videos, which always carries an Idempotency-Key (generated when CreateParams has none) so a
// repeat returns the first task instead of reserving the price again. Uploads are never retried: their
// bodies stream from the caller's readers, which cannot be read a second time.
package client

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultUserAgent is sent unless WithUserAgent says otherwise.
const DefaultUserAgent = "videogen-go-client/1"

// DefaultMaxRetries is how many times a safe request is repeated after its first attempt.
const DefaultMaxRetries = 2

// maxRetryAfter bounds how long the client sleeps on a server's Retry-After by itself: a longer wait is
// the caller's decision, so the error is returned with APIError.RetryAfter set.
const maxRetryAfter = time.Minute

// Client talks to one videogen server with one API key. It is safe for concurrent use.
type Client struct {
	base       string
	apiKey     string
	http       *http.Client
	userAgent  string
	maxRetries int
	backoffMin time.Duration
	backoffMax time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (its transport, proxy, TLS settings). A Timeout on hc also
// bounds downloads, so prefer a context deadline per call.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header, so the server's call log tells your program apart.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithMaxRetries sets how many times a safe request is repeated after its first attempt (0: never).
func WithMaxRetries(n int) Option { return func(c *Client) { c.maxRetries = max(n, 0) } }

// WithBackoff sets the first wait between retries and its cap (defaults 500 ms and 8 s); each retry
// doubles the wait, and a random part of it is left out so many clients do not retry in step.
func WithBackoff(first, limit time.Duration) Option {
	return func(c *Client) {
		if first > 0 {
			c.backoffMin = first
		}
		if limit >= c.backoffMin {
			c.backoffMax = limit
		}
	}
}

// New returns a client of the server at baseURL (such as "https://api.example.com" or
// "http://localhost:8080"; a trailing "/v1", as OpenAI SDKs take it, is accepted) with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	base := strings.TrimRight(baseURL, "/")
	// Uploads live under /uploads/v1, beside /v1, so the client keeps the server's root.
	base = strings.TrimSuffix(base, "/v1")
	c := &Client{
		base: base, apiKey: apiKey, http: defaultHTTPClient, userAgent: DefaultUserAgent,
		maxRetries: DefaultMaxRetries, backoffMin: 500 * time.Millisecond, backoffMax: 8 * time.Second,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// defaultHTTPClient has no overall timeout, which would cut long downloads and uploads short; a server
// that accepts a request and never answers is bounded by ResponseHeaderTimeout instead.
var defaultHTTPClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 2 * time.Minute
	return &http.Client{Transport: t}
}()

// request is one API call, described so that it can be sent again.
type request struct {
	method string
	path   string // from the server's root: "/v1/videos"
	query  url.Values
	body   []byte // a JSON body, the same bytes on every attempt; nil for none
	header http.Header
	retry  bool // the request may be repeated without doing its work twice
}

func (r request) String() string { return r.method + " " + r.path }

// call sends r, repeating it while that is safe and useful, and returns a 2xx answer whose body the
// caller closes. Any other answer is returned as *APIError.
func (c *Client) call(ctx context.Context, r request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r, err) // a bad base URL: no attempt can do better
		}
		resp, err := c.http.Do(req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil || !r.retry || attempt >= c.maxRetries {
				return nil, fmt.Errorf("%s: %w", r, err)
			}
		case resp.StatusCode < 300:
			return resp, nil
		default:
			apiErr := readAPIError(resp)
			if !r.retry || attempt >= c.maxRetries || !shouldRetry(resp) || apiErr.RetryAfter > maxRetryAfter {
				return nil, apiErr
			}
			wait, err = apiErr.RetryAfter, apiErr
		}
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%s: %w (while waiting to retry after: %w)", r, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// newRequest makes one attempt's request, with a fresh reader of the body.
func (c *Client) newRequest(ctx context.Context, r request) (*http.Request, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, err
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	return req, nil
}

func (c *Client) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
}

// callJSON sends r and decodes a 2xx answer into out; it returns the answer's headers.
func (c *Client) callJSON(ctx context.Context, r request, out any) (http.Header, error) {
	resp, err := c.call(ctx, r)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return nil, fmt.Errorf("%s: decode answer (request %s): %w", r, resp.Header.Get("X-Request-Id"), err)
	}
	return resp.Header, nil
}

// shouldRetry says whether an error answer is worth another attempt: the server's x-should-retry
// (which OpenAI's SDKs honour too) decides when present; otherwise 408, 429 and 5xx, which say "not
// now" rather than "not this request".
func shouldRetry(resp *http.Response) bool {
	switch resp.Header.Get("x-should-retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
}

// backoff is the wait before retry number attempt+1: doubling from backoffMin up to backoffMax, of
// which a random half is left out ("equal jitter") so clients that failed together spread out.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.backoffMin
	for i := 0; i < attempt && d < c.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.backoffMax)
	half := d / 2
	return half + rand.N(half+1)
}

// parseRetryAfter reads Retry-After as seconds or as an HTTP date.
func parseRetryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// NewIdempotencyKey returns a random version 4 UUID, the form idempotency keys usually take.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
