package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnavailable reports whether err says the database could not be reached or dropped the connection —
// a fault of the moment that the same request may overcome a few seconds later (docs/operations.md,
// "Dependency faults") — rather than a fault of the request or of our code. Requests that meet one are
// answered 503 service_unavailable with Retry-After, not 500.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection exception
			return true
		case pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // admin shutdown, crash shutdown, cannot connect now
			return true
		case pgErr.Code == "55000" && strings.Contains(pgErr.Message, "accepting connections"):
			return true // the database is closed to connections (ALTER DATABASE … ALLOW_CONNECTIONS false) for maintenance
		case pgErr.Code == "53300": // too many connections
			return true
		}
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var netErr net.Error // a *net.OpError among them: a dial, read or write that failed
	if errors.As(err, &netErr) {
		return true
	}
	// pgx says so in words when it finds a connection already closed.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "terminating connection") ||
		strings.Contains(msg, "does not allow connections") || strings.Contains(msg, "the database system is") || strings.Contains(msg, "failed to connect to") ||
		strings.Contains(msg, "unexpected EOF") || strings.Contains(msg, "connection reset by peer") ||
		(errors.Is(err, context.DeadlineExceeded) && strings.Contains(msg, "connect"))
}

// WithConnectTimeout returns a postgres:// URL whose connection attempts give up after d (libpq's
// connect_timeout, which pgx honours): a database host that does not answer fails a request in d rather
// than after the kernel's TCP timeout of minutes. A URL that sets connect_timeout itself keeps it; other
// URLs (SQLite paths) are returned unchanged.
func WithConnectTimeout(rawURL string, d time.Duration) string {
	if d <= 0 || !(strings.HasPrefix(rawURL, "postgres://") || strings.HasPrefix(rawURL, "postgresql://")) {
		return rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	q := u.Query()
	if q.Get("connect_timeout") != "" {
		return rawURL
	}
	q.Set("connect_timeout", strconv.Itoa(int(max(d.Round(time.Second), time.Second).Seconds())))
	u.RawQuery = q.Encode()
	return u.String()
}
