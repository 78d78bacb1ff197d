package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// S3Config locates one bucket on an S3-compatible server.
type S3Config struct {
	// Endpoint is the server's base URL, such as http://127.0.0.1:9000 or
	// https://s3.eu-west-1.amazonaws.com; its scheme decides TLS. Buckets are addressed by path, so
	// self-hosted servers need no wildcard DNS.
	Endpoint        string
	Bucket          string
	AccessKeyID     string
	SecretAccessKey string
	// Region signs the requests; when empty it is asked of the server once.
	Region string
}

// String leaves the secret out, so a config that ends up in a log or an error does not leak it.
func (c S3Config) String() string {
	return fmt.Sprintf("S3 bucket %q at %s (access key %s)", c.Bucket, c.Endpoint, c.AccessKeyID)
}

// s3PartSize bounds the memory one Put holds at 8 MiB, whatever the object's size.
//
// Put passes size -1, so minio-go v7.4.1 takes putObjectMultipartStreamNoLength (api-put-object.go,
// since ConcurrentStreamParts is off): it allocates ONE buffer of the part size, fills it from the reader
// and uploads it as one part before reading the next, so NumThreads plays no part there. Over plain HTTP
// the part is signed in 64 KiB chunks as it is sent (pkg/signer/request-signature-streaming.go), over
// HTTPS it goes unsigned; neither copies it, and a retry seeks back in the same buffer. Left at 0, the
// part size for an unknown size is 5 TiB / 10,000 parts rounded up to 16 MiB (optimalPartInfo in
// api-put-object-common.go): a 528 MiB buffer per Put. 8 MiB rather than 16 because Go's GC lets the
// heap reach about twice what is live: a 200 MiB Put grows the heap by ~18 MiB with 8 MiB parts and by
// ~33 MiB with 16 MiB parts (store_test.go), and the server's whole heap must stay under 64 MiB. S3's
// smallest part is 5 MiB; 10,000 parts of 8 MiB allow objects of 78 GiB.
const s3PartSize = 8 << 20

// S3 stores files as objects in one bucket of an S3-compatible server.
type S3 struct {
	client *minio.Client
	bucket string
}

var (
	_ Store     = (*S3)(nil)
	_ Presigner = (*S3)(nil)
)

// NewS3 checks cfg, connects and makes sure the bucket exists.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		// The endpoint is not echoed: a malformed one may hold credentials.
		return nil, errors.New("S3 endpoint must be an http:// or https:// URL such as https://s3.eu-west-1.amazonaws.com")
	case u.User != nil:
		return nil, errors.New("S3 endpoint must not carry credentials: set the access key and secret instead")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("S3 endpoint %s must have no path: the bucket is set on its own", cfg.Endpoint)
	case cfg.Bucket == "":
		return nil, errors.New("S3 bucket is not set")
	case cfg.AccessKeyID == "" || cfg.SecretAccessKey == "":
		return nil, errors.New("S3 access key and secret must both be set")
	}
	if err := s3utils.CheckValidBucketName(cfg.Bucket); err != nil {
		return nil, fmt.Errorf("S3 bucket %q: %w", cfg.Bucket, err)
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKeyID, cfg.SecretAccessKey, ""),
		Secure:       u.Scheme == "https",
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
		// minio-go's default of 10 retries with backoff keeps a request waiting for about ten seconds on
		// a storage server that is down; three give a blip its chance and the client its 503 in time.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client for %s: %w", cfg.Endpoint, err)
	}
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	if err != nil {
		if unavailable(err) {
			return nil, fmt.Errorf("check S3 bucket %q at %s: %w: %w", cfg.Bucket, cfg.Endpoint, ErrUnavailable, err)
		}
		return nil, fmt.Errorf("check S3 bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	}
	if !ok {
		return nil, fmt.Errorf("S3 bucket %q does not exist at %s", cfg.Bucket, cfg.Endpoint)
	}
	return &S3{client: client, bucket: cfg.Bucket}, nil
}

// Put streams r as a multipart upload holding one part in memory at a time (see s3PartSize). The object
// appears only when the upload completes; on any failure (ctx cancelled included) minio-go aborts the
// upload with a detached one-minute context, so neither the object nor its parts remain, and a previous
// object under key is left as it was. Only an abort that itself fails (server unreachable) leaves parts:
// a bucket lifecycle rule expiring incomplete uploads covers that.
func (s *S3) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	src := &s3Source{ctx: ctx, r: r}
	info, err := s.client.PutObject(ctx, s.bucket, key, src, -1, minio.PutObjectOptions{
		PartSize:   s3PartSize,
		NumThreads: 1,
	})
	if err != nil {
		if src.err != nil {
			// The data being stored failed (a client's upload cut off), not the storage.
			return 0, fmt.Errorf("s3 put %s: %w", key, err)
		}
		return 0, s3Error("put", key, err)
	}
	return info.Size, nil
}

// s3Source feeds PutObject. It stops when ctx ends, and it turns every read error but io.EOF into a
// sticky error of its own: minio-go's unknown-size upload takes a bare io.ErrUnexpectedEOF (what a
// truncated HTTP request body gives) for the end of the data, and drops an error that arrives with the
// bytes that fill a part; either would complete a truncated object.
type s3Source struct {
	ctx context.Context
	r   io.Reader
	err error
}

func (s *s3Source) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = fmt.Errorf("read source: %w", err)
		return n, s.err
	}
	return n, err
}

// Open returns the object's stream and size.
func (s *S3) Open(ctx context.Context, key string) (io.ReadCloser, int64, error) {
	if err := checkKey(key); err != nil {
		return nil, 0, err
	}
	obj, err := s.client.GetObject(ctx, s.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, 0, s3Error("open", key, err)
	}
	// GetObject only prepares the request: Stat sends it, so a missing key shows here, and the same
	// response then streams the bytes.
	info, err := obj.Stat()
	if err != nil {
		_ = obj.Close()
		if minio.ToErrorResponse(err).Code == minio.NoSuchKey {
			return nil, 0, ErrNotFound
		}
		return nil, 0, s3Error("open", key, err)
	}
	return obj, info.Size, nil
}

// Delete removes key.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return s3Error("delete", key, err)
	}
	return nil
}

// List lists the objects under prefix. Parts of multipart uploads that never completed are not objects
// and are not listed: minio-go aborts them when a Put fails, and a bucket lifecycle rule
// (AbortIncompleteMultipartUpload) covers a process that died mid-upload.
func (s *S3) List(ctx context.Context, prefix string, fn func(Object) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine when fn stops early
	for obj := range s.client.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if obj.Err != nil {
			return s3Error("list", prefix, obj.Err)
		}
		if err := fn(Object{Key: obj.Key, Size: obj.Size, ModTime: obj.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// PresignGet signs a GET of key valid for ttl (1 s to 7 days), answered with contentType when set.
func (s *S3) PresignGet(ctx context.Context, key string, ttl time.Duration, contentType string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	var params url.Values
	if contentType != "" {
		params = url.Values{"response-content-type": {contentType}}
	}
	u, err := s.client.PresignedGetObject(ctx, s.bucket, key, ttl, params)
	if err != nil {
		return "", s3Error("presign", key, err)
	}
	return u.String(), nil
}
