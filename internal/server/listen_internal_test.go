package server

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"videogen/internal/infra/config"
)

// TestWarnIfExposed: outside production, a listener on any address but a loopback one — every
// interface (":8080", "0.0.0.0", "[::]"), a LAN or public address — logs one warning that says what is
// exposed and how to fix it; loopback listeners and every production listener log nothing.
func TestWarnIfExposed(t *testing.T) {
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 8080} }
	for _, tc := range []struct {
		env   string
		addrs []net.Addr
		warn  bool
	}{
		{"development", []net.Addr{tcp("127.0.0.1"), tcp("::1")}, false}, // localhost:8080, the default
		{"development", []net.Addr{tcp("127.0.0.2")}, false},
		{"development", []net.Addr{tcp("::")}, true},      // ":8080", "[::]:8080"
		{"development", []net.Addr{tcp("0.0.0.0")}, true}, // "0.0.0.0:8080"
		{"development", []net.Addr{tcp("192.168.1.20")}, true},
		{"development", []net.Addr{tcp("10.0.0.5")}, true},
		{"development", []net.Addr{tcp("203.0.113.7")}, true},
		{"development", []net.Addr{tcp("127.0.0.1"), tcp("fd00::2")}, true},
		{"production", []net.Addr{tcp("::")}, false},
		{"production", []net.Addr{tcp("192.168.1.20")}, false},
	} {
		var logged bytes.Buffer
		warnIfExposed(&config.Config{AppEnv: tc.env}, tc.addrs, slog.New(slog.NewTextHandler(&logged, nil)))
		out := logged.String()
		if !tc.warn {
			if out != "" {
				t.Errorf("%s on %v: logged %q, want nothing", tc.env, tc.addrs, out)
			}
			continue
		}
		for _, want := range []string{"level=WARN", "webhooks", "loopback", "APP_ENV=production", "ADDR=127.0.0.1:8080", "addr="} {
			if !strings.Contains(out, want) {
				t.Errorf("%s on %v: logged %q, want it to say %q", tc.env, tc.addrs, out, want)
			}
		}
		if n := strings.Count(out, "\n"); n != 1 {
			t.Errorf("%s on %v: %d lines, want one warning", tc.env, tc.addrs, n)
		}
	}
}

// TestListenLocalhost: the host localhost listens on both loopback addresses on one port (where the
// machine has IPv6), so a client whose resolver gives ::1 first is answered as one given 127.0.0.1; any
// other address is one listener.
func TestListenLocalhost(t *testing.T) {
	lns, err := listen("localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	first := lns[0].Addr().(*net.TCPAddr)
	if !first.IP.Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("first listener on %v, want 127.0.0.1", first)
	}
	if probe, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = probe.Close()
		if len(lns) != 2 {
			t.Fatalf("localhost on a machine with ::1: listeners on %s, want 127.0.0.1 and ::1", joinAddrs(addrsOf(lns)))
		}
		second := lns[1].Addr().(*net.TCPAddr)
		if !second.IP.Equal(net.IPv6loopback) || second.Port != first.Port {
			t.Errorf("second listener on %v, want [::1]:%d", second, first.Port)
		}
	}
	for _, ln := range lns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatalf("dial %v: %v", ln.Addr(), err)
		}
		_ = c.Close()
	}

	one, err := listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer one[0].Close()
	if len(one) != 1 {
		t.Errorf("127.0.0.1:0: %d listeners, want 1", len(one))
	}
}
