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
