// Package blob stores the platform's files (generated outputs, later uploaded media) behind one small
// interface, so local disk and object storage are interchangeable.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
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
	// List calls fn for every object whose key starts with prefix (a folder such as "outputs/"),
	// including what an interrupted Put left behind (Local's ".put-*" files), in no particular order. It
	// stops at fn's first error and returns it.
	List(ctx context.Context, prefix string, fn func(Object) error) error
}

// Object is one stored file as List sees it.
type Object struct {
	Key     string
	Size    int64
	ModTime time.Time // when it was last written
}

// Presigner is a store that can hand out a short-lived direct download link to one object.
type Presigner interface {
	// PresignGet returns a URL that answers GET with the object's bytes until ttl passes; the answer
	// carries contentType (overriding what is stored) when it is not empty.
	PresignGet(ctx context.Context, key string, ttl time.Duration, contentType string) (string, error)
}

// checkKey applies Local's key rule (a clean relative slash path without "..") so that a key one store
// accepts, every store accepts.
func checkKey(key string) error {
	if key == "" || strings.Contains(key, "..") || path.Clean("/"+key) != "/"+key {
		return fmt.Errorf("invalid blob key %q", key)
	}
	return nil
}
