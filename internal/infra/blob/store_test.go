package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"videogen/internal/infra/blob"
	"videogen/internal/testkit"
)

func TestLocal(t *testing.T) {
	s, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)
}

func TestS3(t *testing.T) {
	cfg := testkit.StartS3(t)
	s, err := blob.NewS3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)

	t.Run("a failed put leaves no multipart upload behind", func(t *testing.T) {
		ctx := context.Background()
		admin := adminClient(t, cfg)
		// First show that the listing sees a dangling upload, so that an empty one below means something.
		id, err := admin.NewMultipartUpload(ctx, cfg.Bucket, "probe/dangling", minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := incompleteUploads(t, admin, cfg.Bucket); len(got) != 1 || got[0] != "probe/dangling" {
			t.Fatalf("incomplete uploads after starting one: %v", got)
		}
		if err := admin.AbortMultipartUpload(ctx, cfg.Bucket, "probe/dangling", id); err != nil {
			t.Fatal(err)
		}

		// 20 MiB make two full parts before the reader fails.
		if _, err := s.Put(ctx, "failed/parts", &brokenReader{src: patternReader{left: 20 << 20}, err: errBoom}); !errors.Is(err, errBoom) {
			t.Fatalf("Put: %v, want %v", err, errBoom)
		}
		cctx, cancel := context.WithCancel(ctx)
		if _, err := s.Put(cctx, "failed/cancelled", &cancelReader{src: patternReader{left: 30 << 20}, at: 20 << 20, cancel: cancel}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put: %v, want %v", err, context.Canceled)
		}
		if got := incompleteUploads(t, admin, cfg.Bucket); len(got) != 0 {
			t.Errorf("incomplete uploads left: %v", got)
		}
	})

	t.Run("a presigned GET answers the bytes with the given content type", func(t *testing.T) {
		ctx := context.Background()
		data := randomBytes(100<<10 + 3)
		put(t, s, "media/clip", data)
		for _, tc := range []struct{ asked, want string }{
			{"video/mp4", "video/mp4"},
			{"", "application/octet-stream"}, // what Put stores
		} {
			u, err := s.PresignGet(ctx, "media/clip", time.Minute, tc.asked)
			if err != nil {
				t.Fatal(err)
			}
			status, header, body := get(t, u)
			if status != http.StatusOK || header.Get("Content-Type") != tc.want || !bytes.Equal(body, data) {
				t.Errorf("content type %q: status %d, Content-Type %q, %d bytes (want 200, %q, %d bytes)",
					tc.asked, status, header.Get("Content-Type"), len(body), tc.want, len(data))
			}
		}
	})

	t.Run("a presigned URL stops working when its ttl passes", func(t *testing.T) {
		put(t, s, "media/short", []byte("soon gone"))
		// The signature's date has whole seconds: sign just after a second begins, so that the URL is good
		// for nearly all of its one second.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
		u, err := s.PresignGet(context.Background(), "media/short", time.Second, "")
		if err != nil {
			t.Fatal(err)
		}
		if status, _, body := get(t, u); status != http.StatusOK || string(body) != "soon gone" {
			t.Fatalf("before expiry: status %d, body %q", status, body)
		}
		time.Sleep(2 * time.Second)
		if status, _, body := get(t, u); status != http.StatusForbidden {
			t.Errorf("after expiry: status %d (want 403), body %q", status, body)
		}
	})

	t.Run("an unknown-size put holds bounded memory", func(t *testing.T) {
		const size = 200 << 20
		ctx := context.Background()
		var n int64
		growth := heapGrowth(t, func() {
			var err error
			if n, err = s.Put(ctx, "big/object", &patternReader{left: size}); err != nil {
				t.Error(err)
			}
		})
		t.Logf("heap growth while putting %d MiB of unknown size: %.1f MiB", size>>20, float64(growth)/(1<<20))
		if growth > 40<<20 {
			t.Errorf("heap grew by %.1f MiB, want under 40 MiB", float64(growth)/(1<<20))
		}
		if n != size {
			t.Fatalf("Put wrote %d bytes, want %d", n, size)
		}
		rc, got, err := s.Open(ctx, "big/object")
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if got != size {
			t.Fatalf("Open size %d, want %d", got, size)
		}
		if !sameStream(rc, &patternReader{left: size}) {
			t.Error("the stored object differs from what was put")
		}
	})
}

func TestNewS3(t *testing.T) {
	cfg := testkit.StartS3(t)
	ctx := context.Background()

	missing := cfg
	missing.Bucket = "no-such-bucket"
	_, err := blob.NewS3(ctx, missing)
	if want := `S3 bucket "no-such-bucket" does not exist at ` + cfg.Endpoint; err == nil || err.Error() != want {
		t.Errorf("missing bucket: %v, want %q", err, want)
	}

	wrong := cfg
	wrong.SecretAccessKey = "wrong-secret-0123456789"
	_, err = blob.NewS3(ctx, wrong)
	if err == nil || strings.Contains(err.Error(), wrong.SecretAccessKey) {
		t.Errorf("wrong secret: %v, want an error without the secret", err)
	}

	for _, tc := range []struct {
		name string
		edit func(*blob.S3Config)
		want string
	}{
		{"no scheme", func(c *blob.S3Config) { c.Endpoint = "127.0.0.1:9000" }, "http:// or https://"},
		{"other scheme", func(c *blob.S3Config) { c.Endpoint = "ftp://127.0.0.1:9000" }, "http:// or https://"},
		{"credentials in the URL", func(c *blob.S3Config) { c.Endpoint = "http://k:" + c.SecretAccessKey + "@127.0.0.1:9000" }, "must not carry credentials"},
		{"a path", func(c *blob.S3Config) { c.Endpoint += "/bucket" }, "must have no path"},
		{"no bucket", func(c *blob.S3Config) { c.Bucket = "" }, "bucket is not set"},
		{"bad bucket name", func(c *blob.S3Config) { c.Bucket = "Bad_Bucket" }, `S3 bucket "Bad_Bucket"`},
		{"no access key", func(c *blob.S3Config) { c.AccessKeyID = "" }, "access key and secret"},
		{"no secret", func(c *blob.S3Config) { c.SecretAccessKey = "" }, "access key and secret"},
	} {
		c := cfg
		tc.edit(&c)
		_, err := blob.NewS3(ctx, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), cfg.SecretAccessKey) {
			t.Errorf("%s: %v, want an error with %q and without the secret", tc.name, err, tc.want)
		}
	}

	if s := cfg.String(); strings.Contains(s, cfg.SecretAccessKey) {
		t.Errorf("S3Config.String shows the secret: %s", s)
	}
}

// testStore is what every Store must do.
func testStore(t *testing.T, s blob.Store) {
	ctx := context.Background()

	t.Run("round trip", func(t *testing.T) {
		data := randomBytes(3<<20 + 17)
		put(t, s, "videos/vid_1/output.mp4", data)
		if got := read(t, s, "videos/vid_1/output.mp4"); !bytes.Equal(got, data) {
			t.Errorf("read %d bytes, differing from the %d put", len(got), len(data))
		}
	})

	t.Run("empty object", func(t *testing.T) {
		put(t, s, "empty", nil)
		if got := read(t, s, "empty"); len(got) != 0 {
			t.Errorf("read %d bytes, want 0", len(got))
		}
	})

	t.Run("put replaces", func(t *testing.T) {
		put(t, s, "replaced", []byte("first, longer version"))
		put(t, s, "replaced", []byte("second"))
		if got := read(t, s, "replaced"); string(got) != "second" {
			t.Errorf("read %q, want %q", got, "second")
		}
	})

	t.Run("missing key", func(t *testing.T) {
		if _, _, err := s.Open(ctx, "no/such/key"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Open: %v, want ErrNotFound", err)
		}
		if err := s.Delete(ctx, "no/such/key"); err != nil {
			t.Errorf("Delete: %v", err)
		}
	})

	t.Run("delete", func(t *testing.T) {
		put(t, s, "deleted", []byte("x"))
		if err := s.Delete(ctx, "deleted"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Open(ctx, "deleted"); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Open after Delete: %v, want ErrNotFound", err)
		}
	})

	// 10 MiB cross a part boundary of the S3 store; 8 MiB is exactly one part, where minio-go drops an
	// error that comes with the bytes that fill the part.
	for _, tc := range []struct {
		name string
		r    io.Reader
		want error
	}{
		{"reader fails half-way", &brokenReader{src: patternReader{left: 10 << 20}, err: errBoom}, errBoom},
		{"reader fails with ErrUnexpectedEOF", &brokenReader{src: patternReader{left: 10 << 20}, err: io.ErrUnexpectedEOF}, io.ErrUnexpectedEOF},
		{"reader fails with its last bytes, then says EOF", &brokenReader{src: patternReader{left: 8 << 20}, err: errBoom, late: true}, errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "failed/" + strings.ReplaceAll(tc.name, " ", "-")
			if _, err := s.Put(ctx, key, tc.r); !errors.Is(err, tc.want) {
				t.Fatalf("Put: %v, want %v", err, tc.want)
			}
			if _, _, err := s.Open(ctx, key); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open after a failed Put: %v, want ErrNotFound", err)
			}
		})
	}

	t.Run("a failed put keeps the previous object", func(t *testing.T) {
		put(t, s, "kept", []byte("old"))
		if _, err := s.Put(ctx, "kept", &brokenReader{src: patternReader{left: 10 << 20}, err: errBoom}); !errors.Is(err, errBoom) {
			t.Fatalf("Put: %v, want %v", err, errBoom)
		}
		if got := read(t, s, "kept"); string(got) != "old" {
			t.Errorf("read %q, want %q", got, "old")
		}
	})

	t.Run("cancelled context", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		if _, err := s.Put(cctx, "cancelled/mid-way", &cancelReader{src: patternReader{left: 20 << 20}, at: 10 << 20, cancel: cancel}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put: %v, want %v", err, context.Canceled)
		}
		if _, err := s.Put(cctx, "cancelled/before", strings.NewReader("never")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put with a cancelled context: %v, want %v", err, context.Canceled)
		}
		for _, key := range []string{"cancelled/mid-way", "cancelled/before"} {
			if _, _, err := s.Open(ctx, key); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open %s: %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("list", func(t *testing.T) {
		before := time.Now().Add(-time.Minute)
		put(t, s, "listed/a/1.mp4", []byte("one"))
		put(t, s, "listed/a/2.mp4", []byte("two!"))
		put(t, s, "listed/b", nil)
		put(t, s, "listedx/not-under-the-prefix", []byte("x"))
		got := map[string]int64{}
		err := s.List(ctx, "listed/", func(o blob.Object) error {
			if o.ModTime.Before(before) || o.ModTime.After(time.Now().Add(time.Minute)) {
				t.Errorf("%s: modified %v", o.Key, o.ModTime)
			}
			got[o.Key] = o.Size
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"listed/a/1.mp4": 3, "listed/a/2.mp4": 4, "listed/b": 0}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("listed %v, want %v", got, want)
		}
		stop := errors.New("enough")
		n := 0
		if err := s.List(ctx, "listed/", func(blob.Object) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Errorf("a stopping fn: %v after %d objects", err, n)
		}
		if err := s.List(ctx, "nothing-here/", func(o blob.Object) error { t.Errorf("listed %s", o.Key); return nil }); err != nil {
			t.Errorf("an empty prefix: %v", err)
		}
		for _, k := range []string{"listed/a/1.mp4", "listed/a/2.mp4", "listed/b", "listedx/not-under-the-prefix"} {
			if err := s.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.List(ctx, "listed/", func(o blob.Object) error { t.Errorf("%s listed after its deletion", o.Key); return nil }); err != nil {
			t.Error(err)
		}
	})

	t.Run("invalid keys", func(t *testing.T) {
		for _, key := range []string{"", "/abs", "a/../b", "..", "a//b", "a/", "./a"} {
			if _, err := s.Put(ctx, key, strings.NewReader("x")); err == nil {
				t.Errorf("Put %q: no error", key)
			}
			if _, _, err := s.Open(ctx, key); err == nil || errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Open %q: %v, want an invalid key error", key, err)
			}
			if err := s.Delete(ctx, key); err == nil {
				t.Errorf("Delete %q: no error", key)
			}
		}
	})
}

var errBoom = errors.New("boom")

func put(t *testing.T, s blob.Store, key string, data []byte) {
	t.Helper()
	n, err := s.Put(context.Background(), key, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put %s wrote %d bytes, want %d", key, n, len(data))
	}
}

// read returns the content of key, failing the test unless Open's size matches it.
func read(t *testing.T, s blob.Store, key string) []byte {
	t.Helper()
	rc, size, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	if size != int64(len(b)) {
		t.Fatalf("Open %s gave size %d for %d bytes", key, size, len(b))
	}
	return b
}

func get(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(b)
	return b
}

// pattern repeats through a patternReader; its odd length keeps it out of step with part sizes, so
// misplaced parts would show.
var pattern = randomBytes(1<<20 + 7)

// patternReader yields left bytes of pattern without allocating, then io.EOF.
type patternReader struct {
	left, off int64
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := copy(b, pattern[p.off%int64(len(pattern)):])
	n = int(min(int64(n), p.left))
	p.left -= int64(n)
	p.off += int64(n)
	return n, nil
}

// brokenReader yields src, then fails with err. With late, err comes with the last bytes and later reads
// say io.EOF, as a careless reader might.
type brokenReader struct {
	src  patternReader
	err  error
	late bool
	done bool
}

func (b *brokenReader) Read(p []byte) (int, error) {
	if b.done {
		if b.late {
			return 0, io.EOF
		}
		return 0, b.err
	}
	n, _ := b.src.Read(p)
	if b.src.left == 0 && (b.late || n == 0) {
		b.done = true
		return n, b.err
	}
	return n, nil
}

// cancelReader yields src and calls cancel once at bytes have been read.
type cancelReader struct {
	src    patternReader
	at     int64
	cancel context.CancelFunc
	read   int64
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.src.Read(p)
	c.read += int64(n)
	if c.read >= c.at {
		c.cancel()
	}
	return n, err
}

// sameStream reports whether a and b yield the same bytes.
func sameStream(a, b io.Reader) bool {
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	for {
		na, ea := io.ReadFull(a, ba)
		nb, eb := io.ReadFull(b, bb)
		if !bytes.Equal(ba[:na], bb[:nb]) {
			return false
		}
		if ea != nil || eb != nil {
			return (ea == io.EOF || ea == io.ErrUnexpectedEOF) && (eb == io.EOF || eb == io.ErrUnexpectedEOF)
		}
	}
}

// heapGrowth runs fn and returns how far the bytes in heap objects (live or not yet swept) rose above
// what they were before, sampled every 2 ms.
func heapGrowth(t *testing.T, fn func()) uint64 {
	t.Helper()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() uint64 {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			t.Fatalf("metric %s is not available", sample[0].Name)
		}
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := heap()
	var (
		mu   sync.Mutex
		peak = base
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: sample[0].Name}}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(s)
			mu.Lock()
			peak = max(peak, s[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return max(peak, heap()) - base
}

func adminClient(t *testing.T, cfg blob.S3Config) *minio.Core {
	t.Helper()
	c, err := minio.NewCore(strings.TrimPrefix(cfg.Endpoint, "http://"), &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// incompleteUploads lists the keys of the multipart uploads started and neither completed nor aborted.
func incompleteUploads(t *testing.T, c *minio.Core, bucket string) []string {
	t.Helper()
	var keys []string
	for u := range c.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("list incomplete uploads: %v", u.Err)
		}
		keys = append(keys, u.Key)
	}
	return keys
}

// TestLocalLeavesNoEmptyFolders: deleting the last file of a folder removes the folder (and emptied
// parents) but never the store's root, and a later Put makes it again.
func TestLocalLeavesNoEmptyFolders(t *testing.T) {
	root := t.TempDir()
	s, err := blob.NewLocal(root + "/")
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "outputs/video_1/a.mp4", []byte("a"))
	put(t, s, "outputs/video_2/b.mp4", []byte("b"))
	if err := s.Delete(context.Background(), "outputs/video_1/a.mp4"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "outputs", "video_1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the emptied folder stays: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "outputs", "video_2", "b.mp4")); err != nil {
		t.Errorf("a neighbour went too: %v", err)
	}
	if err := s.Delete(context.Background(), "outputs/video_2/b.mp4"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("the root went: %v", err)
	}
	put(t, s, "outputs/video_1/c.mp4", []byte("c"))
	if got := read(t, s, "outputs/video_1/c.mp4"); string(got) != "c" {
		t.Errorf("read %q after the folder was made again", got)
	}
}
