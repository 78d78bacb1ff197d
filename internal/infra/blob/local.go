package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Local stores files under a folder on local disk.
type Local struct {
	root string
}

// NewLocal returns a store rooted at dir, creating it.
func NewLocal(dir string) (*Local, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create blob folder %s: %w", dir, err)
	}
	return &Local{root: filepath.Clean(dir)}, nil
}

func (l *Local) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// Put writes to a temporary file in the same folder, syncs it and renames it into place, so a reader
// never sees half a file and a crash never leaves one under the final name.
func (l *Local) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	p, err := l.path(key)
	if err != nil {
		return 0, err
	}
	var f *os.File
	for attempt := 0; ; attempt++ {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return 0, fmt.Errorf("create folder for %s: %w", key, err)
		}
		f, err = os.CreateTemp(filepath.Dir(p), ".put-*")
		// A Delete may have removed the folder as empty just now: make it again, once.
		if errors.Is(err, fs.ErrNotExist) && attempt == 0 {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("create temp file for %s: %w", key, err)
		}
		break
	}
	tmp := f.Name()
	n, err := io.Copy(f, ctxReader{ctx, r})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, fmt.Errorf("store %s: %w", key, err)
	}
	return n, nil
}

// Open opens key for reading.
func (l *Local) Open(_ context.Context, key string) (io.ReadCloser, int64, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("stat %s: %w", key, err)
	}
	return f, st.Size(), nil
}

// Delete removes key.
func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	// Folders emptied by the deletion go too (outputs/<task>/ after its video), or they would pile up.
	// Removing a folder that is not empty fails, which is the point; one a Put is about to use is
	// recreated by it.
	for dir := filepath.Dir(p); dir != l.root && strings.HasPrefix(dir, l.root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// List walks the folder of prefix.
func (l *Local) List(ctx context.Context, prefix string, fn func(Object) error) error {
	dir := filepath.Join(l.root, filepath.FromSlash(prefix))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a folder deleted while walking, or nothing stored yet
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		return fn(Object{Key: key, Size: info.Size(), ModTime: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
