package web

import (
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.168.1.5, ::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, peer, xff, want string
	}{
		{"no proxy configured for this peer", "203.0.113.9", "1.2.3.4", "203.0.113.9"},
		{"trusted proxy, one hop", "10.1.2.3", "198.51.100.7", "198.51.100.7"},
		{"client forges a left part", "10.1.2.3", "1.1.1.1, 198.51.100.7", "198.51.100.7"},
		{"two trusted proxies", "192.168.1.5", "198.51.100.7, 10.9.9.9", "198.51.100.7"},
		{"trusted proxy without header", "10.1.2.3", "", "10.1.2.3"},
		{"garbage hop", "10.1.2.3", "nonsense", "10.1.2.3"},
		{"ipv6 loopback proxy", "::1", "2001:db8::1", "2001:db8::1"},
		{"ipv4-mapped peer", "::ffff:10.0.0.1", "198.51.100.7", "198.51.100.7"},
		{"all hops trusted", "10.1.2.3", "10.0.0.7", "10.0.0.7"},
		{"two header lines joined", "10.1.2.3", "1.1.1.1,198.51.100.7", "198.51.100.7"},
	} {
		got := clientAddr(netip.MustParseAddr(tc.peer).Unmap(), tc.xff, trusted)
		if got.String() != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ParseTrustedProxies("10.0.0.0/8, not-an-ip"); err == nil {
		t.Error("a malformed TRUSTED_PROXIES must be refused")
	}
}
