package mediafetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"code.dny.dev/ssrf"
)

// dialTLS is the transport's only way out. It resolves the host itself and refuses the host outright if
// any address it resolves to is refused (rather than quietly trying the others), then connects only to
// the addresses it checked, each passing the guardian again in the dialer's Control hook at connect time.
func (f *Fetcher) dialTLS(ctx context.Context, _, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, refuse("the URL has no valid host and port")
	}
	port64, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, refuse(fmt.Sprintf("port %s is not a valid port", portStr))
	}
	port := uint16(port64)

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, f.p.ConnectTimeout)
	defer cancel()
	timedOut := func() bool { return ctx.Err() != nil && parent.Err() == nil }

	addrs, err := f.resolve(ctx, host, port)
	if err != nil {
		if fe, ok := errors.AsType[*Error](err); ok {
			return nil, fe
		}
		if timedOut() {
			return nil, failed(err, "could not resolve host %s within %s", host, human(f.p.ConnectTimeout))
		}
		return nil, failed(err, "could not resolve host %s", host)
	}

	var conn net.Conn
	for i, a := range addrs {
		conn, err = f.dialOne(ctx, netip.AddrPortFrom(a, port), len(addrs)-i)
		if err == nil {
			break
		}
		if isRefusal(err) {
			return nil, refusal(host, a, port, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	if conn == nil {
		if timedOut() {
			return nil, failed(err, "could not connect to %s within %s", host, human(f.p.ConnectTimeout))
		}
		return nil, failed(err, "could not connect to %s", host)
	}

	tc := tls.Client(conn, &tls.Config{
		RootCAs:    f.p.RootCAs,
		ServerName: host,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		if timedOut() {
			return nil, failed(err, "%s did not complete the TLS handshake within %s", host, human(f.p.ConnectTimeout))
		}
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
			return nil, failed(err, "the TLS certificate of %s is not valid", host)
		}
		return nil, failed(err, "the TLS handshake with %s failed", host)
	}
	return tc, nil
}

// dialOne connects to ap with its share of the time left, so one address that never answers does not
// use up the time of the others (as net.Dialer does).
func (f *Fetcher) dialOne(ctx context.Context, ap netip.AddrPort, remaining int) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok && remaining > 1 {
		share := time.Until(deadline) / time.Duration(remaining)
		if share < 2*time.Second {
			share = min(2*time.Second, time.Until(deadline))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, share)
		defer cancel()
	}
	return f.dialer.DialContext(ctx, "tcp", ap.String())
}

// resolve returns the addresses to connect to for host, or a refusal if any of them is refused.
func (f *Fetcher) resolve(ctx context.Context, host string, port uint16) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if why := f.checkAddr(a); why != "" {
			return nil, refuse(why)
		}
		return []netip.Addr{a}, nil
	}
	addrs, err := f.p.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	for i, a := range addrs {
		// A records come back as ::ffff:a.b.c.d; the dialer connects to, and its Control hook sees,
		// a.b.c.d — judge the same address.
		a = a.Unmap()
		addrs[i] = a
		if err := f.guard.SafeAddrPort(netip.AddrPortFrom(a, port)); err != nil {
			return nil, refusal(host, a, port, err)
		}
	}
	return addrs, nil
}

func isRefusal(err error) bool {
	return errors.Is(err, ssrf.ErrProhibitedIP) || errors.Is(err, ssrf.ErrProhibitedPort) ||
		errors.Is(err, ssrf.ErrProhibitedNetwork) || errors.Is(err, ssrf.ErrInvalidHostPort)
}

// refusal explains a guardian refusal of host's address a.
func refusal(host string, a netip.Addr, port uint16, err error) *Error {
	var why string
	switch {
	case errors.Is(err, ssrf.ErrProhibitedPort):
		why = fmt.Sprintf("port %d is not allowed", port)
	case host == a.String():
		why = fmt.Sprintf("%s is %s", a, describe(a))
	default:
		why = fmt.Sprintf("%s resolves to %s, %s", host, a, describe(a))
	}
	return &Error{Code: codeURLNotAllowed, Reason: why, err: err}
}
