package blob

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// TestS3Unavailable: a storage server that cannot be reached, or that fails on its side, marks the error
// ErrUnavailable (503 with Retry-After); a refusal of the request (a missing key, a bad bucket) does not.
// Against a real versitygw that is stopped: a closed port on loopback.
func TestS3Unavailable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := S3Config{Endpoint: "http://127.0.0.1:1", Bucket: "bucket", AccessKeyID: "k", SecretAccessKey: "s", Region: "us-east-1"}
	if _, err := NewS3(ctx, cfg); !IsUnavailable(err) {
		t.Fatalf("NewS3 against a closed port: %v, want ErrUnavailable", err)
	}
	if IsUnavailable(errors.New("s3 put k: AccessDenied")) || IsUnavailable(ErrNotFound) {
		t.Fatal("a refusal was taken for an outage")
	}
}

// TestCountedReportsFailures: every failed call but a missing key is reported with its operation.
func TestCountedReportsFailures(t *testing.T) {
	dir := t.TempDir()
	local, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	store := Counted(local, func(op string) { ops = append(ops, op) })
	ctx := context.Background()
	if _, err := store.Put(ctx, "a/b", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := store.Open(ctx, "a/missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open missing: %v", err)
	}
	if _, err := store.Put(ctx, "../escape", strings.NewReader("x")); err == nil {
		t.Fatal("a bad key was stored")
	}
	if _, err := store.Put(ctx, "a/c", io.MultiReader(strings.NewReader("x"), errReader{})); err == nil {
		t.Fatal("a failing source was stored")
	}
	if strings.Join(ops, ",") != "put,put" {
		t.Fatalf("reported %v, want put,put (a missing key is no failure)", ops)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("source failed") }
