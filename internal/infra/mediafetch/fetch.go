// Package mediafetch opens customer-supplied https:// links for media import without letting them reach
// our own network (docs/design.md §7): every URL, redirect hop and resolved address is checked, at connect time.
package mediafetch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"code.dny.dev/ssrf"
)

// Policy is what the fetcher may reach. The zero value is production's: port 443 only, system roots,
// system resolver, default timeouts, no exceptions to the address guard.
type Policy struct {
	AllowPrefixes []netip.Prefix // networks exempted from the guard (tests: 127.0.0.1/32)
	Ports         []uint16       // allowed ports; empty = 443 only
	RootCAs       *x509.CertPool // nil = system roots
	Resolver      *net.Resolver  // nil = net.DefaultResolver
	// PlainHTTPLoopback lets Post and CheckURL (webhooks) use http:// to a loopback address on any port:
	// development's local receivers. Open never does.
	PlainHTTPLoopback bool

	// 0 = defaults (10 s, 15 s, 30 s, 2 min). ConnectTimeout covers resolving, connecting and the TLS
	// handshake; HeaderTimeout runs from the request being sent to the response headers; IdleTimeout is
	// the longest a body read may wait for bytes; TotalTimeout runs from Open to the end of the body.
	ConnectTimeout, HeaderTimeout, IdleTimeout, TotalTimeout time.Duration
}

const (
	codeURLNotAllowed = "url_not_allowed"
	codeImportFailed  = "import_failed"

	maxRedirects = 5
	maxURLLen    = 8192
	userAgent    = "videogen-import/1"
)

// Error is a refusal the customer can act on. Code is "url_not_allowed" (the URL or a redirect points
// somewhere we never fetch) or "import_failed" (we tried and the remote did not give us a usable file).
// Reason is one sentence for the customer; it never contains a URL's user-info.
type Error struct {
	Code, Reason string

	err error // the underlying cause, for logs; nil for refusals decided from the URL alone
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

// Unwrap gives the cause (an ssrf, DNS, TLS or network error) so logs and errors.Is can see it.
func (e *Error) Unwrap() error { return e.err }

func refuse(reason string) *Error { return &Error{Code: codeURLNotAllowed, Reason: reason} }

func failed(err error, format string, args ...any) *Error {
	return &Error{Code: codeImportFailed, Reason: fmt.Sprintf(format, args...), err: err}
}

// Fetcher opens import URLs under one Policy. It is safe for concurrent use.
type Fetcher struct {
	p      Policy
	guard  *ssrf.Guardian
	dialer *net.Dialer
	client *http.Client
	poster *http.Client // Post's: no redirects
}

// New returns a Fetcher for p, with p's zero fields set to production's defaults.
func New(p Policy) *Fetcher {
	if len(p.Ports) == 0 {
		p.Ports = []uint16{443}
	}
	if p.Resolver == nil {
		p.Resolver = net.DefaultResolver
	}
	p.ConnectTimeout = orDefault(p.ConnectTimeout, 10*time.Second)
	p.HeaderTimeout = orDefault(p.HeaderTimeout, 15*time.Second)
	p.IdleTimeout = orDefault(p.IdleTimeout, 30*time.Second)
	p.TotalTimeout = orDefault(p.TotalTimeout, 2*time.Minute)

	var v4, v6 []netip.Prefix
	for _, pfx := range p.AllowPrefixes {
		if pfx.Addr().Is4() {
			v4 = append(v4, pfx)
		} else {
			v6 = append(v6, pfx)
		}
	}
	f := &Fetcher{
		p: p,
		// The guardian's defaults deny every special-purpose range (loopback, RFC 1918, link-local with
		// the metadata address, 100.64/10, multicast, unspecified, and all IPv6 outside global unicast,
		// which includes IPv4-mapped forms); we narrow its ports from 80+443 to ours.
		guard: ssrf.New(
			ssrf.WithPorts(p.Ports...),
			ssrf.WithAllowedV4Prefixes(v4...),
			ssrf.WithAllowedV6Prefixes(v6...),
		),
	}
	// Control runs after the address is final and before connect(2): nothing resolved later can slip by.
	f.dialer = &net.Dialer{Control: f.guard.Safe}
	f.client = &http.Client{
		Transport: &http.Transport{
			Proxy:          nil, // a proxy would be the address checked, not the target
			DialTLSContext: f.dialTLS,
			DialContext: func(context.Context, string, string) (net.Conn, error) {
				return nil, refuse("only https:// URLs are fetched")
			},
			DisableKeepAlives:      true,
			DisableCompression:     true, // the caller checks the file's own bytes; no transparent gunzip
			ResponseHeaderTimeout:  p.HeaderTimeout,
			MaxResponseHeaderBytes: 64 << 10,
		},
		CheckRedirect: f.checkRedirect,
	}
	f.poster = f.newPoster()
	return f
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Response is a 200 answer whose body is still to be read. Close Body when done.
type Response struct {
	Body          io.ReadCloser // reads fail with *Error{import_failed} when the body stalls past IdleTimeout or TotalTimeout passes
	ContentType   string        // the declared media type, lower-case, parameters removed ("" if none)
	ContentLength int64         // -1 when unknown
	URL           string        // the final URL after redirects
}

var (
	errTotal  = errors.New("total import time passed")
	errIdle   = errors.New("body stalled")
	errClosed = errors.New("body closed")
)

// Open checks raw, connects through the guard (every resolved address, every redirect hop, checked at
// connect time), follows at most 5 redirects and returns once the final answer is a 200. Its errors are
// *Error, except when ctx ends first: then it returns ctx's error, wrapped.
func (f *Fetcher) Open(ctx context.Context, raw string) (*Response, error) {
	u, e := f.parse(raw)
	if e != nil {
		return nil, e
	}
	rctx, cancel := context.WithCancelCause(ctx)
	total := time.AfterFunc(f.p.TotalTimeout, func() { cancel(errTotal) })
	stop := func() {
		total.Stop()
		cancel(errClosed)
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		stop()
		return nil, refuse("the URL is not valid")
	}
	req.Header.Set("User-Agent", userAgent)

	resp, err := f.client.Do(req)
	if err != nil {
		if resp != nil {
			_ = resp.Body.Close()
		}
		stop()
		return nil, f.failure(ctx, rctx, err, "could not fetch the file from %s", u.Hostname())
	}
	if ctx.Err() != nil {
		// The transport can hand back an answer that raced the caller's deadline: when it ends the request
		// the server may see the connection close, give up and answer before Do notices the deadline.
		_ = resp.Body.Close()
		stop()
		return nil, fmt.Errorf("import: %w", context.Cause(ctx))
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		stop()
		return nil, failed(nil, "the server answered %s", statusText(resp.StatusCode))
	}
	b := &body{rc: resp.Body, f: f, ctx: ctx, rctx: rctx, host: resp.Request.URL.Hostname(), stop: stop}
	b.idle = time.AfterFunc(time.Hour, func() { cancel(errIdle) })
	b.idle.Stop()
	return &Response{
		Body:          b,
		ContentType:   mediaType(resp.Header.Get("Content-Type")),
		ContentLength: resp.ContentLength,
		URL:           resp.Request.URL.String(), // no user-info: check refused any on every hop
	}, nil
}

// failure turns an error met while fetching into what Open or Read returns. rctx is the request's
// context (a child of the caller's ctx); its cause tells our own deadlines from the caller's.
func (f *Fetcher) failure(ctx, rctx context.Context, err error, format string, args ...any) error {
	if ctx.Err() != nil {
		return fmt.Errorf("import: %w", context.Cause(ctx))
	}
	switch context.Cause(rctx) {
	case errTotal:
		return failed(err, "the download did not finish within %s", human(f.p.TotalTimeout))
	case errIdle:
		return failed(err, "the server stopped sending data for %s", human(f.p.IdleTimeout))
	}
	if fe, ok := errors.AsType[*Error](err); ok {
		return fe
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		// Dial and handshake timeouts come back as *Error from dialTLS, so this is the header wait.
		return failed(err, "the server did not answer within %s", human(f.p.HeaderTimeout))
	}
	return failed(err, format, args...)
}

// body enforces the idle and total limits on reads and ends the request when closed.
type body struct {
	rc        io.ReadCloser
	f         *Fetcher
	ctx, rctx context.Context
	host      string
	idle      *time.Timer
	stop      func()
}

func (b *body) Read(p []byte) (int, error) {
	// Only time spent waiting on the server counts as idle, not time the caller spends storing bytes.
	b.idle.Reset(b.f.p.IdleTimeout)
	n, err := b.rc.Read(p)
	b.idle.Stop()
	// When the request's context is cancelled mid-body, net/http sometimes reports a clean io.EOF; a
	// file cut short must never look whole, so after a cancellation even EOF is a failure.
	if err != nil && (err != io.EOF || b.rctx.Err() != nil) {
		err = b.f.failure(b.ctx, b.rctx, err, "the connection to %s broke during the download", b.host)
	}
	return n, err
}

func (b *body) Close() error {
	b.idle.Stop()
	b.stop()
	return b.rc.Close()
}

func mediaType(header string) string {
	if header == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(header)
	if err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter) {
		return ""
	}
	return strings.ToLower(mt)
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}

// human writes d the way reasons show it: "15 s", "2 min", "200 ms".
func human(d time.Duration) string {
	switch {
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d >= time.Second && d%time.Second == 0:
		return fmt.Sprintf("%d s", d/time.Second)
	case d < time.Second && d%time.Millisecond == 0:
		return fmt.Sprintf("%d ms", d/time.Millisecond)
	}
	return d.String()
}
