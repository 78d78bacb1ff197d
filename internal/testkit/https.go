package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"videogen/internal/infra/mediafetch"
)

// ServeHTTPSHost serves h as https://host/ until the test ends, and returns an import policy under which
// that exact link works offline: the policy's DNS resolves host to the server, trusts the server's
// certificate (made for host) and exempts the server's address from the guard — that one address, and
// nothing else. A link without a port means port 443, so the server listens on port 443 of a random
// loopback address (127.0.0.0/8 is all loopback on Linux); binding it needs root or
// CAP_NET_BIND_SERVICE.
func ServeHTTPSHost(t testing.TB, host string, h http.Handler) mediafetch.Policy {
	t.Helper()
	cert := selfSigned(t, host)
	var ln net.Listener
	var addr netip.Addr
	for attempt := 0; ln == nil; attempt++ {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		addr = netip.AddrFrom4([4]byte{127, b[0]%250 + 2, b[1], b[2]%250 + 2})
		l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 443).String())
		switch {
		case err == nil:
			ln = l
		case errors.Is(err, syscall.EACCES):
			t.Fatalf("serve https://%s/ on port 443: %v (needs root or CAP_NET_BIND_SERVICE)", host, err)
		case attempt == 10:
			t.Fatalf("serve https://%s/ on port 443: %v", host, err)
		}
	}
	srv := httptest.NewUnstartedServer(h)
	_ = srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return mediafetch.Policy{
		RootCAs:       roots,
		Resolver:      StartDNS(t, map[string][]netip.Addr{host: {addr}}),
		AllowPrefixes: []netip.Prefix{netip.PrefixFrom(addr, 32)},
	}
}

// selfSigned makes a certificate for host that is its own authority, valid for the test's duration.
func selfSigned(t testing.TB, host string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
