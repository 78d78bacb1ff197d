package testkit

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"videogen/internal/infra/blob"
)

// versitygwVersion is the S3-compatible server the tests run against (docs/design.md §7); the Makefile's
// test-deps target builds the same version into VersitygwPath.
const versitygwVersion = "v1.8.0"

// VersitygwPath is where `make test-deps` builds versitygw: $XDG_CACHE_HOME/videogen/versitygw-v1.8.0,
// with XDG's default of ~/.cache.
func VersitygwPath() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if !filepath.IsAbs(cache) { // XDG says a relative value is to be ignored
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "videogen", "versitygw-"+versitygwVersion, "versitygw")
}

// StartS3 runs a real S3-compatible server for the test (versitygw, backed by a temporary folder, on a
// free loopback port), creates a fresh bucket and returns its settings. The server is stopped when the
// test ends. The binary is $VERSITYGW, else VersitygwPath, else versitygw on PATH.
func StartS3(t testing.TB) blob.S3Config {
	t.Helper()
	return StartS3Server(t).Config
}

// S3Server is a running versitygw a test can stop and start again on the same address and folder, as an
// outage of the storage would.
type S3Server struct {
	Config blob.S3Config
	bin    string
	dir    string
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *LockedBuffer
}

// StartS3Server is StartS3 with the handle to stop and restart the server.
func StartS3Server(t testing.TB) *S3Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := &S3Server{bin: versitygwBinary(t), dir: t.TempDir(), addr: addr, Config: blob.S3Config{
		Endpoint:        "http://" + addr,
		Bucket:          "test-" + randHex(6),
		AccessKeyID:     "test" + randHex(8),
		SecretAccessKey: randHex(20),
		Region:          "us-east-1", // versitygw's default
	}}
	// Registered after t.TempDir, so it runs before the folder is removed.
	t.Cleanup(func() { s.Stop(t) })
	s.Start(t)
	client, err := minio.New(addr, &minio.Options{
		Creds:        credentials.NewStaticV4(s.Config.AccessKeyID, s.Config.SecretAccessKey, ""),
		Region:       s.Config.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.MakeBucket(ctx, s.Config.Bucket, minio.MakeBucketOptions{Region: s.Config.Region}); err != nil {
		t.Fatalf("create bucket %s: %v; versitygw said: %s", s.Config.Bucket, err, s.out.String())
	}
	return s
}

// Start runs the server (again) and returns once it answers.
func (s *S3Server) Start(t testing.TB) {
	t.Helper()
	s.out = &LockedBuffer{}
	cmd := exec.Command(s.bin, "--access", s.Config.AccessKeyID, "--secret", s.Config.SecretAccessKey, "--port", s.addr, "posix", s.dir)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	probe := &http.Client{Timeout: time.Second}
	Eventually(t, 15*time.Second, "versitygw answers on "+s.addr, func() bool {
		select {
		case <-exited:
			t.Fatalf("versitygw exited before answering (%s): %s", cmd.ProcessState, s.out.String())
		default:
		}
		// Any HTTP answer (403 for an unsigned request) means it is serving.
		resp, err := probe.Get(s.Config.Endpoint + "/")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil
	}, func() string { return s.out.String() })
}

// Stop kills the server (nothing to do when it is not running).
func (s *S3Server) Stop(t testing.TB) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

func versitygwBinary(t testing.TB) string {
	t.Helper()
	const missing = "versitygw is not installed: run `make test-deps`"
	if p := os.Getenv("VERSITYGW"); p != "" {
		if !isExecutable(p) {
			t.Fatalf("%s (VERSITYGW=%s is not an executable file)", missing, p)
		}
		return p
	}
	if p := VersitygwPath(); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	t.Fatal(missing)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
