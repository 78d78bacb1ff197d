package mediafetch_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"code.dny.dev/ssrf"

	"videogen/internal/infra/mediafetch"
	"videogen/internal/testkit"
)

var catPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR a cat, more or less")

// rig is a TLS server on 127.0.0.1 (its certificate is valid for example.com and 127.0.0.1), a DNS
// server that makes test names resolve where a row needs them, and two policies.
type rig struct {
	srv  *httptest.Server
	port string
	// allow reaches the test server: 127.0.0.1/32 and the server's port are exempted, nothing else.
	allow mediafetch.Policy
	// prod is production's guard (no exceptions, port 443 only) with the test's roots and resolver.
	prod mediafetch.Policy
}

func newRig(t *testing.T) *rig {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", func(w http.ResponseWriter, r *http.Request) {
		if ua := r.Header.Get("User-Agent"); ua != "videogen-import/1" {
			http.Error(w, "unexpected User-Agent "+ua, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "Image/PNG; name=cat")
		_, _ = w.Write(catPNG)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("to"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n > 0 {
			w.Header().Set("Location", fmt.Sprintf("/hop/%d", n-1))
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(catPNG)
	})
	mux.HandleFunc("/missing", http.NotFound)
	mux.HandleFunc("/silent", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never a header
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write(catPNG)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // and then nothing
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		for {
			if _, err := w.Write([]byte{0}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)

	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portN, _ := strconv.ParseUint(port, 10, 16)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	a := netip.MustParseAddr
	resolver := testkit.StartDNS(t, map[string][]netip.Addr{
		"example.com":    {a("127.0.0.1")},
		"loopback.test":  {a("127.0.0.1")},
		"private.test":   {a("10.0.0.5")},
		"mixed.test":     {a("93.184.215.14"), a("10.0.0.7")},
		"metadata.test":  {a("169.254.169.254")},
		"v6private.test": {a("fd00::5")},
		"mapped.test":    {a("::ffff:10.0.0.9")}, // an AAAA record holding an IPv4-mapped address
	})
	prod := mediafetch.Policy{
		RootCAs:        roots,
		Resolver:       resolver,
		ConnectTimeout: 2 * time.Second,
		HeaderTimeout:  2 * time.Second,
		IdleTimeout:    2 * time.Second,
		TotalTimeout:   5 * time.Second,
	}
	allow := prod
	allow.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	allow.Ports = []uint16{443, uint16(portN)}
	return &rig{srv: srv, port: port, allow: allow, prod: prod}
}

// at is a URL on the test server, by IP.
func (r *rig) at(path string) string { return "https://127.0.0.1:" + r.port + path }

// redirect is a URL on the test server that redirects to to.
func (r *rig) redirect(to string) string { return r.at("/redirect?to=" + url.QueryEscape(to)) }

// host is https://host:<server port>/: only the host differs from what the allowing policy reaches.
func (r *rig) host(host string) string { return "https://" + host + ":" + r.port + "/cat.png" }

func TestOpenServesTheFile(t *testing.T) {
	r := newRig(t)
	want := "https://example.com:" + r.port + "/cat.png"
	resp, err := mediafetch.New(r.allow).Open(t.Context(), want)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	if !bytes.Equal(got, catPNG) {
		t.Errorf("body = %q, want %q", got, catPNG)
	}
	if resp.ContentType != "image/png" {
		t.Errorf("ContentType = %q, want image/png", resp.ContentType)
	}
	if resp.ContentLength != int64(len(catPNG)) {
		t.Errorf("ContentLength = %d, want %d", resp.ContentLength, len(catPNG))
	}
	if resp.URL != want {
		t.Errorf("URL = %q, want %q", resp.URL, want)
	}
}

func TestOpen(t *testing.T) {
	r := newRig(t)
	short := r.allow
	short.HeaderTimeout = 300 * time.Millisecond
	short.IdleTimeout = 200 * time.Millisecond
	short.TotalTimeout = 500 * time.Millisecond

	const refused, failed = "url_not_allowed", "import_failed"
	rows := []struct {
		name   string
		policy mediafetch.Policy
		url    string
		code   string // "" = a 200 is expected
		reason string // what the reason must say (or, for a 200, the final URL)
	}{
		// The URL as given, under production's guard.
		{"http", r.prod, "http://example.com/cat.png", refused, "only https://"},
		{"user-info", r.prod, "https://user:secret@example.com/cat.png", refused, "user name or password"},
		{"user only", r.prod, "https://secret@example.com/cat.png", refused, "user name or password"},
		{"localhost", r.prod, "https://localhost/cat.png", refused, "localhost always names the machine itself"},
		{"localhost subdomain", r.prod, "https://a.localhost./cat.png", refused, "always names the machine itself"},
		{"loopback", r.prod, "https://127.0.0.1/cat.png", refused, "127.0.0.1 is a loopback address"},
		{"IPv6 loopback", r.prod, "https://[::1]/cat.png", refused, "::1 is a loopback address"},
		{"10/8", r.prod, "https://10.0.0.1/cat.png", refused, "10.0.0.1 is a private network address"},
		{"172.16/12", r.prod, "https://172.16.0.1/cat.png", refused, "172.16.0.1 is a private network address"},
		{"192.168/16", r.prod, "https://192.168.1.1/cat.png", refused, "192.168.1.1 is a private network address"},
		{"metadata", r.prod, "https://169.254.169.254/latest/meta-data/", refused, "169.254.169.254 is the cloud metadata address"},
		{"link-local", r.prod, "https://169.254.1.1/", refused, "169.254.1.1 is a link-local address"},
		{"shared 100.64/10", r.prod, "https://100.64.0.1/", refused, "100.64.0.1 is a shared (carrier-grade NAT) address"},
		{"unspecified", r.prod, "https://0.0.0.0/", refused, "0.0.0.0 is the unspecified address"},
		{"multicast", r.prod, "https://224.0.0.1/", refused, "224.0.0.1 is a multicast address"},
		{"IPv6 private", r.prod, "https://[fd00::1]/", refused, "fd00::1 is a private network address"},
		{"IPv6 zone", r.prod, "https://[fe80::1%25eth0]/", refused, "zone"},
		{"mapped loopback", r.prod, "https://[::ffff:127.0.0.1]/", refused, "::ffff:127.0.0.1 is an IPv4-mapped form of 127.0.0.1, a loopback address"},
		{"mapped private", r.prod, "https://[::ffff:10.0.0.1]/", refused, "::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1, a private network address"},
		{"decimal IPv4", r.prod, "https://2130706433/", refused, "2130706433 reads as an IP address in a non-standard form"},
		{"octal IPv4", r.prod, "https://0177.0.0.1/", refused, "0177.0.0.1 reads as an IP address in a non-standard form"},
		{"hex IPv4", r.prod, "https://0x7f.0.0.1/", refused, "0x7f.0.0.1 reads as an IP address in a non-standard form"},
		{"hex whole IPv4", r.prod, "https://0x7f000001/", refused, "0x7f000001 reads as an IP address"},
		{"short IPv4", r.prod, "https://127.1/", refused, "127.1 reads as an IP address in a non-standard form"},
		{"IPv4 trailing dot", r.prod, "https://10.0.0.1./", refused, "10.0.0.1. reads as an IP address"},
		{"fullwidth IPv4", r.prod, "https://１２７.０.０.１/", refused, "non-ASCII"},
		{"port", r.prod, "https://example.com:" + r.port + "/cat.png", refused, "port " + r.port + " is not allowed, only 443"},
		{"no host", r.prod, "https:///cat.png", refused, "no host"},
		{"not a URL", r.prod, "https://exa mple.com/", refused, "not valid"},

		// Names, judged by every address they resolve to, when connecting.
		{"name to 10/8", r.prod, "https://private.test/cat.png", refused, "private.test resolves to 10.0.0.5, a private network address"},
		{"name to public and private", r.prod, "https://mixed.test/cat.png", refused, "mixed.test resolves to 10.0.0.7, a private network address"},
		{"name to loopback", r.prod, "https://loopback.test/cat.png", refused, "loopback.test resolves to 127.0.0.1, a loopback address"},
		{"name to metadata", r.prod, "https://metadata.test/", refused, "metadata.test resolves to 169.254.169.254, the cloud metadata address"},
		{"name to IPv6 private", r.prod, "https://v6private.test/", refused, "v6private.test resolves to fd00::5, a private network address"},
		{"name to mapped AAAA", r.prod, "https://mapped.test/", refused, "mapped.test resolves to 10.0.0.9, a private network address"},
		{"name that does not exist", r.prod, "https://nowhere.test/cat.png", failed, "could not resolve host nowhere.test"},

		// Redirects: the first hop is allowed, the redirect is not.
		{"redirect to http", r.allow, r.redirect("http://example.com:" + r.port + "/cat.png"), refused, "redirected to http://example.com:" + r.port + "/cat.png (redirect 1), but only https://"},
		{"redirect with user-info", r.allow, r.redirect("https://user:secret@example.com:" + r.port + "/cat.png"), refused, "redirected to https://example.com:" + r.port + "/cat.png (redirect 1), but URLs with a user name or password"},
		{"redirect to other port", r.allow, r.redirect("https://example.com:1/cat.png"), refused, "but port 1 is not allowed"},
		{"redirect to localhost", r.allow, r.redirect(r.host("localhost")), refused, "but localhost always names the machine itself"},
		{"redirect to loopback", r.allow, r.redirect(r.host("127.0.0.2")), refused, "but 127.0.0.2 is a loopback address"},
		{"redirect to IPv6 loopback", r.allow, r.redirect(r.host("[::1]")), refused, "but ::1 is a loopback address"},
		{"redirect to 10/8", r.allow, r.redirect(r.host("10.0.0.1")), refused, "but 10.0.0.1 is a private network address"},
		{"redirect to 172.16/12", r.allow, r.redirect(r.host("172.16.0.1")), refused, "but 172.16.0.1 is a private network address"},
		{"redirect to 192.168/16", r.allow, r.redirect(r.host("192.168.1.1")), refused, "but 192.168.1.1 is a private network address"},
		{"redirect to metadata", r.allow, r.redirect(r.host("169.254.169.254")), refused, "but 169.254.169.254 is the cloud metadata address"},
		{"redirect to shared", r.allow, r.redirect(r.host("100.64.0.1")), refused, "but 100.64.0.1 is a shared"},
		{"redirect to unspecified", r.allow, r.redirect(r.host("0.0.0.0")), refused, "but 0.0.0.0 is the unspecified address"},
		{"redirect to mapped loopback", r.allow, r.redirect(r.host("[::ffff:127.0.0.1]")), refused, "but ::ffff:127.0.0.1 is an IPv4-mapped IPv6 address"},
		{"redirect to mapped private", r.allow, r.redirect(r.host("[::ffff:10.0.0.1]")), refused, "but ::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1"},
		{"redirect to decimal IPv4", r.allow, r.redirect(r.host("2130706433")), refused, "but 2130706433 reads as an IP address"},
		{"redirect to octal IPv4", r.allow, r.redirect(r.host("0177.0.0.1")), refused, "but 0177.0.0.1 reads as an IP address"},
		{"redirect to hex IPv4", r.allow, r.redirect(r.host("0x7f.0.0.1")), refused, "but 0x7f.0.0.1 reads as an IP address"},
		{"redirect to short IPv4", r.allow, r.redirect(r.host("127.1")), refused, "but 127.1 reads as an IP address"},
		{"redirect to name to 10/8", r.allow, r.redirect(r.host("private.test")), refused, "private.test resolves to 10.0.0.5, a private network address"},
		{"redirect to name to public and private", r.allow, r.redirect(r.host("mixed.test")), refused, "mixed.test resolves to 10.0.0.7"},
		{"redirect to name to metadata", r.allow, r.redirect(r.host("metadata.test")), refused, "metadata.test resolves to 169.254.169.254, the cloud metadata address"},
		{"redirect to allowed name", r.allow, r.redirect(r.host("example.com")), "", r.host("example.com")},
		{"5 redirects", r.allow, r.at("/hop/5"), "", r.at("/hop/0")},
		{"6 redirects", r.allow, r.at("/hop/6"), refused, "the link redirected more than 5 times"},

		// The remote.
		{"404", r.allow, r.at("/missing"), failed, "the server answered 404 Not Found"},
		{"no headers", short, r.at("/silent"), failed, "the server did not answer within 300 ms"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			resp, err := mediafetch.New(row.policy).Open(t.Context(), row.url)
			if row.code == "" {
				if err != nil {
					t.Fatalf("Open(%s): %v", row.url, err)
				}
				_ = resp.Body.Close()
				if resp.URL != row.reason {
					t.Errorf("URL = %q, want %q", resp.URL, row.reason)
				}
				return
			}
			if err == nil {
				_ = resp.Body.Close()
				t.Fatalf("Open(%s) = %s, want %s", row.url, resp.URL, row.code)
			}
			checkError(t, err, row.code, row.reason)
			if d := time.Since(start); row.code == refused && d > time.Second {
				t.Errorf("refusal took %s; it should not wait on the network", d)
			}
		})
	}
}

// checkError requires err to be an *Error with code and a reason containing reason, and no password.
func checkError(t *testing.T, err error, code, reason string) {
	t.Helper()
	fe, ok := errors.AsType[*mediafetch.Error](err)
	if !ok {
		t.Fatalf("error = %v (%T), want *mediafetch.Error %s", err, err, code)
	}
	if fe.Code != code || !strings.Contains(fe.Reason, reason) {
		t.Errorf("error = %s: %q\nwant      %s: …%q…", fe.Code, fe.Reason, code, reason)
	}
	if strings.Contains(fe.Error(), "secret") {
		t.Errorf("error echoes user-info: %q", fe.Error())
	}
}

func TestBodyLimits(t *testing.T) {
	r := newRig(t)
	p := r.allow
	p.IdleTimeout = 200 * time.Millisecond
	p.TotalTimeout = 600 * time.Millisecond
	for _, row := range []struct{ path, reason string }{
		{"/stall", "the server stopped sending data for 200 ms"},
		{"/trickle", "the download did not finish within 600 ms"},
	} {
		t.Run(row.path, func(t *testing.T) {
			t.Parallel()
			resp, err := mediafetch.New(p).Open(t.Context(), r.at(row.path))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			start := time.Now()
			got, err := io.ReadAll(resp.Body)
			if err == nil {
				t.Fatalf("read %d bytes and no error", len(got))
			}
			checkError(t, err, "import_failed", row.reason)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("read ended after %s", d)
			}
		})
	}
}

// The caller's own deadline is not the remote's fault: Open returns the context's error, not an *Error.
func TestOpenCallerDeadline(t *testing.T) {
	r := newRig(t)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := mediafetch.New(r.allow).Open(ctx, r.at("/silent"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want context.DeadlineExceeded", err)
	}
	if _, ok := errors.AsType[*mediafetch.Error](err); ok {
		t.Errorf("error = %v, want no *mediafetch.Error", err)
	}
}

// The dialer refuses by itself at connect time, whatever was checked before it.
func TestDialerGuards(t *testing.T) {
	r := newRig(t)
	addr := r.srv.Listener.Addr().String()
	onPort := r.prod
	onPort.Ports = r.allow.Ports
	err := mediafetch.DialGuarded(t.Context(), mediafetch.New(onPort), addr)
	if !errors.Is(err, ssrf.ErrProhibitedIP) {
		t.Errorf("dial %s without an exception: %v, want ssrf.ErrProhibitedIP", addr, err)
	}
	err = mediafetch.DialGuarded(t.Context(), mediafetch.New(r.prod), addr)
	if !errors.Is(err, ssrf.ErrProhibitedPort) {
		t.Errorf("dial %s on a port not allowed: %v, want ssrf.ErrProhibitedPort", addr, err)
	}
	if err := mediafetch.DialGuarded(t.Context(), mediafetch.New(r.allow), addr); err != nil {
		t.Errorf("dial %s with 127.0.0.1/32 exempted: %v", addr, err)
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{
		"https://example.com/cat.png", "http://example.com/", "https://u:p@example.com/", "https://127.0.0.1/",
		"https://[::ffff:127.0.0.1]/", "https://2130706433/", "https://0177.0.0.1/", "https://0x7f.0.0.1/",
		"https://127.1/", "https://localhost/", "https://example.com:8443/", "https://[fe80::1%25eth0]/",
		"https://１２７.０.０.１/", "https://bücher.example/", "HTTPS://EXAMPLE.COM./a?b#c", "https:example.com",
		"https://example.com:443/", "https://[2606:4700::1]/", "//example.com/", "https://%31%32%37.0.0.1/",
	} {
		f.Add(s)
	}
	fetcher := mediafetch.New(mediafetch.Policy{})
	guard := ssrf.New(ssrf.WithPorts(443))
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := mediafetch.CheckURL(fetcher, raw)
		if err != nil {
			fe, ok := errors.AsType[*mediafetch.Error](err)
			if !ok || fe.Code != "url_not_allowed" || fe.Reason == "" {
				t.Fatalf("CheckURL(%q) = %v, want an *Error url_not_allowed with a reason", raw, err)
			}
			if pu, err := url.Parse(raw); err == nil && pu.User != nil && pu.User.String() != "" &&
				strings.Contains(fe.Reason, pu.User.String()+"@") {
				t.Fatalf("reason %q echoes the user-info of %q", fe.Reason, raw)
			}
			return
		}
		if u.Scheme != "https" || u.User != nil || u.Hostname() == "" {
			t.Fatalf("CheckURL(%q) accepted scheme %q, user %v, host %q", raw, u.Scheme, u.User, u.Hostname())
		}
		if p := u.Port(); p != "" && p != "443" && strings.TrimLeft(p, "0") != "443" {
			t.Fatalf("CheckURL(%q) accepted port %q", raw, p)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil {
			if err := guard.SafeAddr(a); err != nil || a.Is4In6() {
				t.Fatalf("CheckURL(%q) accepted address %s: %v", raw, a, err)
			}
		}
		// What the transport will request must say the same.
		again, err := url.Parse(u.String())
		if err != nil || again.Scheme != "https" || again.User != nil || again.Host != u.Host {
			t.Fatalf("CheckURL(%q) gives %q, which parses as %v (%v)", raw, u.String(), again, err)
		}
	})
}
