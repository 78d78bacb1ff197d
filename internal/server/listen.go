package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"videogen/internal/infra/config"
)

// listen opens the public port on addr (ADDR). The host "localhost" means both loopback addresses on
// one port, 127.0.0.1 and ::1: which of the two "localhost" resolves to first depends on the client's
// machine, and a client that tries only the first (older Node, some tools) would be refused on the
// other. The IPv6 one is left out where the machine has no IPv6 loopback. Any other address is one
// listener, as net.Listen takes it.
func listen(addr string) ([]net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "localhost" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		return []net.Listener{ln}, nil
	}
	v4, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port))
	if err != nil {
		return nil, err
	}
	// Port 0 chose a port: the IPv6 loopback takes the same one.
	_, port, _ = net.SplitHostPort(v4.Addr().String())
	v6, err := net.Listen("tcp", net.JoinHostPort("::1", port))
	switch {
	case err == nil:
		return []net.Listener{v4, v6}, nil
	case errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EAFNOSUPPORT) || errors.Is(err, syscall.EPROTONOSUPPORT):
		return []net.Listener{v4}, nil // no IPv6 here: localhost cannot resolve to ::1 either
	default:
		// Most likely another program holds [::1]:port, and would answer the clients that try ::1 first.
		_ = v4.Close()
		return nil, fmt.Errorf("localhost means 127.0.0.1 and ::1: %w", err)
	}
}

// addrsOf is where the listeners listen.
func addrsOf(lns []net.Listener) []net.Addr {
	var out []net.Addr
	for _, ln := range lns {
		out = append(out, ln.Addr())
	}
	return out
}

// joinAddrs writes addresses for the log.
func joinAddrs(addrs []net.Addr) string {
	var out []string
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return strings.Join(out, " ")
}

// exposed reports whether a listener can be reached from other machines: any address but a loopback
// one (every interface, a LAN or public address).
func exposed(a net.Addr) bool {
	tcp, ok := a.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

// warnIfExposed logs a warning when a server outside production can be reached from other machines:
// development's conveniences — webhooks to this machine's loopback ports, e-mailed links printed to the
// log, test top-ups — are for one developer, not for a network.
func warnIfExposed(cfg *config.Config, addrs []net.Addr, log *slog.Logger) {
	if cfg.Production() {
		return
	}
	for _, a := range addrs {
		if exposed(a) {
			log.Warn("a development server is listening beyond this machine: outside production any tenant may "+
				"aim webhooks at this machine's loopback ports over plain http, e-mailed sign-in and reset links are "+
				"printed to the log, and TEST_TOPUPS=1 funds accounts for free; set APP_ENV=production, or listen "+
				"on loopback only (ADDR=127.0.0.1:8080, or leave ADDR unset for localhost:8080)",
				"addr", a.String(), "app_env", cfg.AppEnv)
			return
		}
	}
}

// stopSignals returns a context that ends at the first SIGINT or SIGTERM — the graceful shutdown
// begins, with its drain — and a channel closed at the second, which cuts the drain short (a developer
// pressing Ctrl-C twice). Signals after that are ignored: the shutdown itself always runs to its end,
// and only SIGKILL cuts it. release stops listening for them.
func stopSignals(parent context.Context) (ctx context.Context, again <-chan struct{}, release func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	second, done := make(chan struct{}), make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			close(second)
		case <-done:
		}
	}()
	return ctx, second, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
