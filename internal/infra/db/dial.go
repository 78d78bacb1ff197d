package db

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// deadPeer is how long a PostgreSQL connection may go without the server acknowledging what was sent
// (TCP_USER_TIMEOUT) — or without an answer to keepalive probes while idle — before the kernel drops it.
// A database host that vanishes without closing its connections (a power cut, a partition) then fails
// the queries waiting on them in this time, which the API answers 503 service_unavailable, instead of
// leaving them to the kernel's retransmission timeout of about 15 minutes.
const deadPeer = 15 * time.Second

// dialPostgres dials with connectTimeout (connect_timeout, DATABASE_CONNECT_TIMEOUT) and bounds how long
// an established connection may wait for a silent server (deadPeer).
func dialPostgres(connectTimeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		Timeout:         connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: 2 * time.Second, Count: 5},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil // a Unix socket has no peer to lose
			}
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(deadPeer.Milliseconds()))
			})
			if err != nil {
				return err
			}
			return serr
		},
	}
	return d.DialContext
}
