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
// repeat returns the first task instead of reserving the price again. A repeated DELETE that finds the
// video gone after a lost answer reports the deletion (see Client.Delete). Uploads are never retried:
// their bodies stream from the caller's readers, which cannot be read a second time.
//
// A request that failed may still have been carried out: its answer can be lost on the way back, or be
// a 5xx that a server or proxy gives after the work was done. MayHaveRun tells such a failure from a
// certain refusal, so a program knows when to look before it repeats a create by other means.
package client

import (
	"bytes"
	"context"
	cryptorand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
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
// caller closes. Any other answer becomes an *APIError, for AsAPIError to find. Every error is a
// *callError recording whether an attempt may have been carried out by the server (see MayHaveRun).
func (c *Client) call(ctx context.Context, r request) (*http.Response, error) {
	ran := false // an earlier attempt, or an earlier write of this one by net/http, may have been carried out
	for attempt := 0; ; attempt++ {
		req, err := c.newRequest(ctx, r)
		if err != nil {
			// A bad base URL: no attempt can do better, and this one was never sent.
			return nil, &callError{err: fmt.Errorf("%s: %w", r, err), earlier: ran}
		}
		resp, rewritten, err := c.send(req)
		ran = ran || rewritten
		var wait time.Duration
		switch {
		case err != nil:
			reached := mayHaveReached(err)
			err = fmt.Errorf("%s: %w", r, err)
			if ctx.Err() != nil || !r.retry || attempt >= c.maxRetries {
				return nil, &callError{err: err, earlier: ran, last: reached}
			}
			ran = ran || reached
		case resp.StatusCode < 300:
			return resp, nil
		default:
			apiErr := readAPIError(resp)
			// A 5xx may come after the work was done (a proxy's 502 for an answer lost behind it); a
			// 4xx, 429 included, is a refusal of this attempt.
			done := apiErr.Status >= 500
			if !r.retry || attempt >= c.maxRetries || !shouldRetry(resp) || apiErr.RetryAfter > maxRetryAfter {
				return nil, &callError{err: apiErr, earlier: ran, last: done}
			}
			ran = ran || done
			wait, err = apiErr.RetryAfter, apiErr
		}
		if wait <= 0 {
			wait = c.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &callError{err: fmt.Errorf("%s: %w (while waiting to retry after: %w)", r, ctx.Err(), err), earlier: ran}
		case <-t.C:
		}
	}
}

// callError is the error of a request whose attempts all failed, with what they tell about whether the
// server carried it out anyway. Its text is its cause's.
type callError struct {
	err     error
	earlier bool // an attempt before the last may have been carried out
	last    bool // the last attempt may have been carried out
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// MayHaveRun reports whether the request that failed with err may nonetheless have been carried out by
// the server. It is true when an attempt of it was sent and no answer came back (a network error after
// connecting, a timeout, a cancelled context), or the answer was a 5xx, which a server or proxy can give
// after the work was done; and when a 2xx answer could not be read. It is false when every attempt was
// refused with a 4xx (429 included) or could not connect, and for errors that are not a request's
// (an invalid argument, a reader that failed before anything was sent).
//
// For Create, false means nothing was reserved. True means a video may exist and be paid for: repeat the
// create with the same CreateParams.IdempotencyKey (the server answers with the first video, if there
// is one, instead of paying again), or look for it with List before creating another.
func MayHaveRun(err error) bool {
	var ce *callError
	return errors.As(err, &ce) && (ce.earlier || ce.last)
}

// mayHaveReached reports whether an attempt that failed with err may have reached the server: only a
// failure to connect (a dial error: refused, unreachable, unknown host) proves that it did not.
func mayHaveReached(err error) bool {
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// send is c.http.Do, also reporting whether net/http wrote the request more than once by itself: it
// repeats a request that carries an Idempotency-Key when a kept-alive connection breaks before any
// answer, and the earlier write may have been carried out although no error shows it.
func (c *Client) send(req *http.Request) (resp *http.Response, rewritten bool, err error) {
	var writes atomic.Int32
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { writes.Add(1) },
	}))
	resp, err = c.http.Do(req)
	return resp, writes.Load() > 1, err
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
		// The server accepted the request: whatever it did stands, though its answer is unreadable.
		return nil, &callError{err: fmt.Errorf("%s: decode answer (request %s): %w", r, resp.Header.Get("X-Request-Id"), err), last: true}
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
