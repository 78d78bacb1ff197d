// Package blob stores the platform's files (generated outputs, later uploaded media) behind one small
// interface, so local disk and object storage are interchangeable.
package blob

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is returned for a key that holds nothing.
var ErrNotFound = errors.New("blob not found")

// Store keeps files by key. Put streams: it never holds a whole file in memory.
type Store interface {
	// Put stores r under key and returns the number of bytes written. A failed Put leaves nothing behind.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open returns the content and its size.
	Open(ctx context.Context, key string) (io.ReadCloser, int64, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}
