package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
	"gorm.io/gorm"
)

// TestIsUnavailable: what a lost or closed database gives is a fault of the moment (503), what a request
// or our code gives is not.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"not found", gorm.ErrRecordNotFound, false},
		{"unique violation", &pgconn.PgError{Code: "23505", Message: "duplicate key"}, false},
		{"syntax error", &pgconn.PgError{Code: "42601"}, false},
		{"admin shutdown (pg_terminate_backend)", fmt.Errorf("read: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}), true},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"database closed to connections", &pgconn.PgError{Code: "55000", Message: `database "x" is not currently accepting connections`}, true},
		{"other object state", &pgconn.PgError{Code: "55000", Message: "object in use"}, false},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"refused", fmt.Errorf("dial: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), true},
		{"reset", fmt.Errorf("query: %w", syscall.ECONNRESET), true},
		{"closed conn (pgx)", errors.New("conn closed"), true},
		{"request cancelled", context.Canceled, false},
		{"plain error", errors.New("record has no price"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsUnavailable(tc.err); got != tc.want {
				t.Fatalf("IsUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestWithConnectTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u@h/db?sslmode=disable", "postgres://u@h/db?connect_timeout=5&sslmode=disable"},
		{"postgres://u@h/db?connect_timeout=2", "postgres://u@h/db?connect_timeout=2"},
		{"data/videogen.db", "data/videogen.db"},
	} {
		if got := WithConnectTimeout(tc.in, 5*time.Second); got != tc.want {
			t.Errorf("WithConnectTimeout(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDialBoundsASilentServer: connections to PostgreSQL carry TCP_USER_TIMEOUT and keepalives, so a
// server that vanishes without closing them fails their queries in deadPeer, not in the kernel's 15
// minutes.
func TestDialBoundsASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := dialPostgres(time.Second)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var userTimeout, keepAlive int
	var gerr error
	_ = raw.Control(func(fd uintptr) {
		userTimeout, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		if gerr == nil {
			keepAlive, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		}
	})
	if gerr != nil {
		t.Fatal(gerr)
	}
	if userTimeout != int(deadPeer.Milliseconds()) || keepAlive != 1 {
		t.Fatalf("TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d; want %d ms and 1", userTimeout, keepAlive, deadPeer.Milliseconds())
	}
}
