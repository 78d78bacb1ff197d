package testkit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// StartDNS runs a DNS server on a free loopback UDP port until the test ends. It answers A and AAAA
// queries for the names in records (names are case-insensitive, with or without the trailing dot) and
// NXDOMAIN for any other name. The returned resolver sends every query to it, so a test can make any name
// resolve to any address — a private one, or example.com to 127.0.0.1 to match httptest's certificate.
func StartDNS(t testing.TB, records map[string][]netip.Addr) *net.Resolver {
	t.Helper()
	return StartDNSZone(t, records).Resolver()
}

// DNSZone is a DNS server's records, which a test may change while it serves (DNS rebinding).
type DNSZone struct {
	mu       sync.Mutex
	records  map[string][]netip.Addr
	resolver *net.Resolver
}

// Set makes name resolve to addrs from now on.
func (z *DNSZone) Set(name string, addrs ...netip.Addr) {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.records[dns.CanonicalName(name)] = addrs
}

// Resolver sends every query to the zone's server.
func (z *DNSZone) Resolver() *net.Resolver { return z.resolver }

func (z *DNSZone) lookup(name string) ([]netip.Addr, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	a, ok := z.records[dns.CanonicalName(name)]
	return a, ok
}

// StartDNSZone is StartDNS with records the test can change.
func StartDNSZone(t testing.TB, records map[string][]netip.Addr) *DNSZone {
	t.Helper()
	zone := &DNSZone{records: make(map[string][]netip.Addr, len(records))}
	for name, addrs := range records {
		zone.records[dns.CanonicalName(name)] = addrs
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dns: listen: %v", err)
	}
	started := make(chan struct{})
	srv := &dns.Server{
		PacketConn:        pc,
		Handler:           dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) { _ = w.WriteMsg(answer(zone, q)) }),
		NotifyStartedFunc: func() { close(started) },
	}
	failed := make(chan error, 1)
	go func() { failed <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-failed:
		_ = pc.Close()
		t.Fatalf("dns: serve: %v", err)
	}
	t.Cleanup(func() { _ = srv.Shutdown() })

	addr := pc.LocalAddr().String()
	zone.resolver = &net.Resolver{
		PreferGo: true,
		// Answers are small, so UDP always suffices; Go's resolver speaks UDP over any PacketConn.
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", addr)
		},
	}
	return zone
}

func answer(zone *DNSZone, q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	if len(q.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	question := q.Question[0]
	addrs, ok := zone.lookup(question.Name)
	if !ok {
		m.Rcode = dns.RcodeNameError
		return m
	}
	hdr := dns.RR_Header{Name: question.Name, Rrtype: question.Qtype, Class: dns.ClassINET, Ttl: 60}
	for _, a := range addrs {
		switch {
		case question.Qtype == dns.TypeA && a.Is4():
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case question.Qtype == dns.TypeAAAA && a.Is6():
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return m
}
