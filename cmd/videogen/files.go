package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// checkRel refuses a path that could leave the folder it is relative to: the paths come from the
// database (keys) and from a backup's manifest, and neither may write outside DATA_DIR or the backup.
func checkRel(p string) error {
	if p == "" || strings.Contains(p, "..") || strings.HasPrefix(p, "/") || path.Clean(p) != p || strings.Contains(p, `\`) {
		return fmt.Errorf("refusing the file path %q: not a clean relative path", p)
	}
	return nil
}

// copyFile streams src into dst through a temporary file beside it (synced, then renamed), so a crash
// never leaves half a file under the final name, and returns the bytes and the SHA-256 it copied. When
// want is not empty the copy must have that digest, or dst is left untouched. A video is never held in
// memory: io.Copy moves it 32 KiB at a time. The temporary name is the blob store's own (.put-*), so the
// storage sweep removes one a crash leaves in DATA_DIR. dirs collects the folders written to, for
// syncDirs.
func copyFile(src, dst, want string, dirs map[string]bool) (int64, string, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, "", err // fs.ErrNotExist is the caller's to judge
	}
	defer in.Close()
	dir := filepath.Dir(dst)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, "", fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return 0, "", fmt.Errorf("create a file in %s: %w", dir, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), in)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if err == nil && want != "" && sum != want {
		err = fmt.Errorf("its SHA-256 is %s, the manifest says %s: the backup is damaged", sum, want)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return 0, "", fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	dirs[dir] = true
	return n, sum, nil
}

// fileSHA256 reads a file through SHA-256.
func fileSHA256(p string) (int64, string, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("read %s: %w", p, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// syncFile flushes a file written by someone else (SQLite's VACUUM INTO, pg_dump) to disk.
func syncFile(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// syncDirs flushes the folders files were renamed into, so the renames themselves survive a power cut.
func syncDirs(dirs map[string]bool) error {
	for d := range dirs {
		f, err := os.Open(d)
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
		err = f.Sync()
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	return nil
}

// dirEntries names what a folder holds; a folder that does not exist holds nothing.
func dirEntries(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// resolvePath is where p really is: absolute, with every symbolic link of the part that exists
// resolved (the rest does not exist yet, so it holds none). Containment checks compare resolved paths,
// so a link inside DATA_DIR to elsewhere, or a path reaching DATA_DIR through a link, is judged by where
// it leads. A dangling link is refused: what it would lead to once created is anyone's guess.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	var rest []string
	for at := abs; ; {
		real, err := filepath.EvalSymlinks(at)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("resolve %s: %w", abs, err)
		}
		if _, lerr := os.Lstat(at); lerr == nil {
			return "", fmt.Errorf("%s is a symbolic link to something that does not exist", at)
		}
		parent := filepath.Dir(at)
		if parent == at {
			return abs, nil
		}
		rest = append([]string{filepath.Base(at)}, rest...)
		at = parent
	}
}

// within reports whether p is dir or inside it (both absolute and clean).
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
