package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
)

// ErrUnavailable marks a storage failure of the moment — the storage server unreachable, or answering
// that it is overloaded or failing — which the same call may overcome later. The API answers it 503
// service_unavailable with Retry-After (docs/operations.md, "Dependency faults"); the worker keeps the
// task and tries again.
var ErrUnavailable = errors.New("storage unavailable")

// IsUnavailable reports whether err is a storage failure of the moment (ErrUnavailable).
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

// s3Error wraps an S3 call's error with what was being done, marked ErrUnavailable when the server could
// not be reached or answered with a server-side failure (5xx, SlowDown).
func s3Error(op, key string, err error) error {
	if unavailable(err) {
		return fmt.Errorf("s3 %s %s: %w: %w", op, key, ErrUnavailable, err)
	}
	return fmt.Errorf("s3 %s %s: %w", op, key, err)
}

func unavailable(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return true
	}
	resp := minio.ToErrorResponse(err)
	if resp.StatusCode >= 500 {
		return true
	}
	switch resp.Code {
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
		return true
	}
	return false
}

// Counted returns store with every failed call (other than a missing key) reported to failed with its
// operation — put, get, delete or list — for the storage-errors metric. A store that presigns keeps
// presigning ("presign" failures are reported too).
func Counted(store Store, failed func(op string)) Store {
	c := counted{inner: store, failed: failed}
	if p, ok := store.(Presigner); ok {
		return countedPresigner{counted: c, presigner: p}
	}
	return c
}

type counted struct {
	inner  Store
	failed func(op string)
}

func (c counted) note(op string, err error) {
	if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, context.Canceled) {
		c.failed(op)
	}
}

func (c counted) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	n, err := c.inner.Put(ctx, key, r)
	c.note("put", err)
	return n, err
}

func (c counted) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	rc, n, err := c.inner.Open(ctx, key)
	c.note("get", err)
	return rc, n, err
}

func (c counted) Delete(ctx context.Context, key string) error {
	err := c.inner.Delete(ctx, key)
	c.note("delete", err)
	return err
}

func (c counted) List(ctx context.Context, prefix string, fn func(Object) error) error {
	err := c.inner.List(ctx, prefix, fn)
	c.note("list", err)
	return err
}

type countedPresigner struct {
	counted
	presigner Presigner
}

func (c countedPresigner) PresignGet(ctx context.Context, key string, ttl time.Duration, contentType string) (string, error) {
	link, err := c.presigner.PresignGet(ctx, key, ttl, contentType)
	c.note("presign", err)
	return link, err
}
