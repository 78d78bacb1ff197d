package mediafetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// The same guard that keeps imports out of our network keeps customers' webhook endpoints out of it
// (docs/webhooks.md#what-an-endpoint-may-be): CheckURL judges a URL when the endpoint is saved, Post
// judges it again, and every address it resolves to at connect time, on every delivery — so a name that
// resolved to a public address when it was saved and to 10.0.0.5 now (DNS rebinding) is refused now.

// Answer is what an endpoint answered a Post: its status and the first bytes of its body.
type Answer struct {
	Status int
	Head   []byte
}

// CheckURL judges a webhook URL: the checks of Open's URL (https, no user-info, the allowed ports, an IP
// literal's address), then every address its host resolves to now, without connecting. Its errors are
// *Error with code url_not_allowed, or import_failed when the name does not resolve.
func (f *Fetcher) CheckURL(ctx context.Context, raw string) error {
	u, e := f.parseTarget(raw)
	if e != nil {
		return e
	}
	if u.Scheme == "http" {
		_, err := f.resolveLoopback(ctx, u.Hostname())
		return err
	}
	port := uint16(443)
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseUint(p, 10, 16) // parseTarget checked it
		port = uint16(n)
	}
	if _, err := f.resolve(ctx, u.Hostname(), port); err != nil {
		if fe, ok := errors.AsType[*Error](err); ok {
			return fe
		}
		return failed(err, "the host name %s does not resolve", u.Hostname())
	}
	return nil
}

// Post sends body to raw with header, through the guard, and reads at most keep bytes of the answer
// (the rest is drained, so the connection ends cleanly). It follows no redirect: a 3xx is the answer.
// ctx bounds the whole exchange. Its errors are *Error (refused, or no usable answer), or ctx's.
func (f *Fetcher) Post(ctx context.Context, raw string, header http.Header, body []byte, keep int) (*Answer, error) {
	u, e := f.parseTarget(raw)
	if e != nil {
		return nil, e
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, refuse("the URL is not valid")
	}
	req.Header = header.Clone()
	req.Header.Set("User-Agent", webhookAgent)
	resp, err := f.poster.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, failed(err, "%s did not answer in time", u.Hostname())
		}
		if fe, ok := errors.AsType[*Error](err); ok {
			return nil, fe
		}
		return nil, failed(err, "could not reach %s", u.Hostname())
	}
	defer func() { _ = resp.Body.Close() }()
	head, err := io.ReadAll(io.LimitReader(resp.Body, int64(keep)))
	if err == nil {
		// Drain a little more so a short answer ends cleanly; a huge one is cut off by Close.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	}
	return &Answer{Status: resp.StatusCode, Head: head}, nil
}

const webhookAgent = "videogen-webhooks/1"

// parseTarget is parse for a webhook URL: as Open's, and, where the policy allows plain loopback
// (development), also http:// to a loopback address on any port.
func (f *Fetcher) parseTarget(raw string) (*url.URL, *Error) {
	if f.p.PlainHTTPLoopback && strings.HasPrefix(strings.ToLower(raw), "http://") {
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return nil, refuse("the URL is not valid")
		}
		if u.User != nil {
			return nil, refuse("URLs with a user name or password are never used")
		}
		if !isLoopbackName(u.Hostname()) {
			return nil, refuse("http:// is allowed only to this machine (localhost, 127.0.0.1, [::1]) in development; use https://")
		}
		return u, nil
	}
	return f.parse(raw)
}

func isLoopbackName(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return a.IsLoopback()
	}
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

// resolveLoopback returns host's addresses, refusing it unless every one is loopback: the development
// allowance for http:// reaches this machine and nothing else.
func (f *Fetcher) resolveLoopback(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.IsLoopback() {
			return nil, refuse(fmt.Sprintf("%s is not a loopback address; http:// reaches only this machine", a))
		}
		return []netip.Addr{a}, nil
	}
	addrs, err := f.p.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, failed(err, "the host name %s does not resolve", host)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			return nil, refuse(fmt.Sprintf("%s resolves to %s, which is not a loopback address; http:// reaches only this machine", host, a))
		}
	}
	return addrs, nil
}

// dialPlain is the poster's way out for http:// (development only): to loopback addresses, checked
// again at connect time.
func (f *Fetcher) dialPlain(ctx context.Context, _, addr string) (net.Conn, error) {
	if !f.p.PlainHTTPLoopback {
		return nil, refuse("only https:// URLs are used")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, refuse("the URL has no valid host and port")
	}
	addrs, err := f.resolveLoopback(ctx, host)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Timeout: f.p.ConnectTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !ap.Addr().Unmap().IsLoopback() {
			return refuse(address + " is not a loopback address")
		}
		return nil
	}}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0].Unmap().String(), port))
}

// newPoster is the client Post uses: the guarded TLS dialer, plain loopback where allowed, no proxy,
// no redirects.
func (f *Fetcher) newPoster() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialTLSContext:         f.dialTLS,
			DialContext:            f.dialPlain,
			ResponseHeaderTimeout:  f.p.HeaderTimeout,
			MaxResponseHeaderBytes: 64 << 10,
			MaxIdleConnsPerHost:    2,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
