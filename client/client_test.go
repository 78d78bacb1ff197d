package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"videogen/client"
	"videogen/internal/testkit"
)

const model = "videogen-2.0-mini-480p" // $0.05 a second: 4 s cost 0.200000

// newClient is a client of s with a funded account's key, retrying quickly so failures show fast. Every
// exchange goes through the OpenAPI check, so the client and the document cannot drift apart.
func newClient(t *testing.T, s *testkit.Server, opts ...client.Option) (*client.Client, testkit.Account) {
	t.Helper()
	acct := s.NewAccount(t, "10")
	opts = append([]client.Option{client.WithBackoff(5*time.Millisecond, 50*time.Millisecond), validated(t)}, opts...)
	return client.New(s.URL, acct.Key, opts...), acct
}

// validated sends a client's requests through testkit.OpenAPITransport, which fails the test on any
// request or answer the OpenAPI document does not allow.
func validated(t *testing.T) client.Option {
	return client.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)})
}

// TestCreateWaitDownload is the whole life of a video through the client: created queued with its price
// reserved, waited for at the server's pace with every answer shown, downloaded as an MP4, settled.
func TestCreateWaitDownload(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		c, _ := newClient(t, s)
		ctx := context.Background()

		v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "a paper boat on a rainy street", Seconds: 4})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.ID, "video_") || v.Status != client.StatusQueued || v.Seconds != "4" || v.Size != "864x496" ||
			v.Billing.Amount != "0.200000" || v.Billing.State != "reserved" {
			t.Fatalf("created: %+v", v)
		}

		var seen []string
		done, err := c.Wait(ctx, v.ID, func(u *client.Video) { seen = append(seen, u.Status) })
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != client.StatusCompleted || done.Progress != 100 || done.Billing.State != "settled" || done.Billing.Amount != "0.200000" ||
			done.CompletedAt == nil || done.ExpiresAt == nil || !done.Done() {
			t.Fatalf("waited: %+v", done)
		}
		if len(seen) == 0 || seen[len(seen)-1] != client.StatusCompleted {
			t.Fatalf("onUpdate saw %v; want every answer, the last one completed", seen)
		}

		var mp4 bytes.Buffer
		n, err := c.Download(ctx, v.ID, &mp4)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(mp4.Len()) || n < 1000 || string(mp4.Bytes()[4:8]) != "ftyp" {
			t.Fatalf("downloaded %d bytes (%d buffered), starting %q: not an MP4", n, mp4.Len(), mp4.Bytes()[:min(mp4.Len(), 16)])
		}

		got, err := c.Get(ctx, v.ID)
		if err != nil || got.ID != v.ID || got.Status != client.StatusCompleted {
			t.Fatalf("get: %+v %v", got, err)
		}
		models, err := c.Models(ctx)
		if err != nil || len(models) != 8 || models[0].PricePerSecond == "" || len(models[0].Sizes) == 0 {
			t.Fatalf("models: %+v %v", models, err)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestWaitStopsWithItsContext: cancelling Wait returns at once with the last video seen and an error
// that is the context's; the task keeps going on the server.
func TestWaitStopsWithItsContext(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"SIM_DURATION": "1h"})
	c, _ := newClient(t, s)
	v, err := c.Create(context.Background(), client.CreateParams{Model: model, Prompt: "a long take"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	last, err := c.Wait(ctx, v.ID, func(*client.Video) { cancel() })
	if !errors.Is(err, context.Canceled) || last == nil || last.ID != v.ID || last.Done() {
		t.Fatalf("Wait after cancel: %+v, %v", last, err)
	}
	if got, err := c.Get(context.Background(), v.ID); err != nil || got.Done() {
		t.Fatalf("the task after Wait gave up: %+v %v", got, err)
	}
}

// TestWaitReportsAFailedVideo: a failed generation is an error of its own type, carrying the video with
// its code, and nothing is charged.
func TestWaitReportsAFailedVideo(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	c, _ := newClient(t, s)
	ctx := context.Background()
	v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "a boat that sinks [sim:fail]"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Wait(ctx, v.ID, nil)
	var failed *client.VideoFailedError
	if !errors.As(err, &failed) || failed.Video.Error == nil || failed.Video.Error.Code != "generation_failed" ||
		got == nil || got.Status != client.StatusFailed || got.Billing.State != "released" {
		t.Fatalf("Wait of a failing video: %+v, %v", got, err)
	}
	if !strings.Contains(err.Error(), v.ID) || !strings.Contains(err.Error(), "generation_failed") {
		t.Fatalf("the error does not say which video failed and why: %v", err)
	}
	if _, err := c.Download(ctx, v.ID, io.Discard); client.ErrorCode(err) != "video_not_ready" {
		t.Fatalf("download of a failed video: %v", err)
	}
}

// TestListPaging: List pages with limit/after and reports has_more; ListAll follows the cursor through
// every page in either order and stops when the loop does.
func TestListPaging(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		c, _ := newClient(t, s)
		ctx := context.Background()
		var ids []string // oldest first
		for i := range 5 {
			v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "shot " + string(rune('a'+i))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, v.ID)
		}
		newest := slices.Clone(ids)
		slices.Reverse(newest)

		first, err := c.List(ctx, client.ListParams{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(first.Data) != 2 || !first.HasMore || first.FirstID != newest[0] || first.LastID != newest[1] {
			t.Fatalf("first page: %+v", first)
		}
		second, err := c.List(ctx, client.ListParams{Limit: 2, After: first.LastID})
		if err != nil || len(second.Data) != 2 || second.Data[0].ID != newest[2] || !second.HasMore {
			t.Fatalf("second page: %+v %v", second, err)
		}

		collect := func(p client.ListParams) []string {
			var out []string
			for v, err := range c.ListAll(ctx, p) {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, v.ID)
			}
			return out
		}
		if got := collect(client.ListParams{Limit: 2}); !slices.Equal(got, newest) {
			t.Fatalf("ListAll newest first: %v, want %v", got, newest)
		}
		if got := collect(client.ListParams{Limit: 2, Order: "asc"}); !slices.Equal(got, ids) {
			t.Fatalf("ListAll oldest first: %v, want %v", got, ids)
		}
		var some []string
		for v, err := range c.ListAll(ctx, client.ListParams{Limit: 2}) {
			if err != nil {
				t.Fatal(err)
			}
			if some = append(some, v.ID); len(some) == 3 {
				break
			}
		}
		if !slices.Equal(some, newest[:3]) {
			t.Fatalf("ListAll with an early break: %v", some)
		}
		for v, err := range c.ListAll(ctx, client.ListParams{Limit: 500}) {
			if v != nil || client.ErrorCode(err) != "invalid_request" {
				t.Fatalf("ListAll of a refused page: %v, %v", v, err)
			}
		}
	})
}

// TestTypedErrors: refusals come back as *APIError with status, code, param, type and request id, and
// wrapping does not hide them.
func TestTypedErrors(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		c, _ := newClient(t, s)
		ctx := context.Background()

		_, err := c.Create(ctx, client.CreateParams{Model: "videogen-9000", Prompt: "anything"})
		e, ok := client.AsAPIError(err)
		if !ok || e.Status != 400 || e.Code != "invalid_model" || e.Param != "model" || e.Type != "invalid_request_error" ||
			e.RequestID == "" || e.Message == "" {
			t.Fatalf("bad model: %#v (%v)", e, err)
		}
		for _, want := range []string{"400", "invalid_model", "(model)", e.RequestID} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the message %q lacks %q", err.Error(), want)
			}
		}
		if wrapped := errors.Join(errors.New("outer"), err); client.ErrorCode(wrapped) != "invalid_model" {
			t.Fatal("ErrorCode does not see through wrapping")
		}

		if _, err := c.Get(ctx, "video_doesnotexist"); client.ErrorCode(err) != "not_found" {
			t.Fatalf("unknown id: %v", err)
		}
		stranger := client.New(s.URL, "vg_"+strings.Repeat("x", 40), validated(t))
		if _, err := stranger.List(ctx, client.ListParams{}); client.ErrorCode(err) != "invalid_api_key" {
			t.Fatalf("unknown key: %v", err)
		}
		v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "not made yet"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Download(ctx, v.ID, io.Discard); client.ErrorCode(err) != "video_not_ready" {
			t.Fatalf("download before completion: %v", err)
		}
		if client.ErrorCode(context.Canceled) != "" {
			t.Fatal("a non-API error has a code")
		}
	})
}

// TestIdempotency: a create repeated with the same key answers the first task and reserves nothing
// more; the same key with another request is refused. Keys generated by Create differ.
func TestIdempotency(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		c, _ := newClient(t, s)
		ctx := context.Background()
		p := client.CreateParams{Model: model, Prompt: "once only", Seconds: 5, IdempotencyKey: client.NewIdempotencyKey()}
		a, err := c.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Create(ctx, p)
		if err != nil || b.ID != a.ID {
			t.Fatalf("repeat with the same key: %+v %v, want %s", b, err, a.ID)
		}
		if es := testkit.Entries(t, s.DB, a.ID); len(es) != 1 {
			t.Fatalf("ledger entries of the task: %v, want one reservation", testkit.Kinds(es))
		}
		p.Prompt = "something else"
		if _, err := c.Create(ctx, p); client.ErrorCode(err) != "idempotency_conflict" {
			t.Fatalf("same key, other request: %v", err)
		}
		p.IdempotencyKey = ""
		x, err := c.Create(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		y, err := c.Create(ctx, p)
		if err != nil || x.ID == y.ID {
			t.Fatalf("two creates without a key of the caller's made %s and %s; want two tasks", x.ID, y.ID)
		}
	})
}

// TestUploadThenCreate: files stream up as multipart, their URLs go into a create, and the video made
// from the first frame completes. A file the server refuses, and a reader that fails, are errors that
// say so.
func TestUploadThenCreate(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		c, _ := newClient(t, s)
		ctx := context.Background()
		png := testkit.PNG(t, 64, 64)
		up, err := c.Upload(ctx,
			client.File{Part: client.PartFirstFrame, Name: "first.png", Body: bytes.NewReader(png)},
			client.File{Part: client.PartImage, Name: "style.jpg", Body: bytes.NewReader(testkit.JPEG(t, 32, 32))},
		)
		if err != nil {
			t.Fatal(err)
		}
		if up.Object != "media.batch" || up.StartImageURL == "" || len(up.ImageURLs) != 1 || len(up.Files) != 2 ||
			up.Files[0].Filename != "first.png" || up.Files[0].Bytes != int64(len(png)) || up.Files[0].ContentType != "image/png" ||
			up.Files[1].ContentType != "image/jpeg" || up.ExpiresAt == 0 {
			t.Fatalf("upload answer: %+v", up)
		}
		v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "the boat sails off", StartImageURL: up.StartImageURL})
		if err != nil {
			t.Fatal(err)
		}
		if v, err = c.Wait(ctx, v.ID, nil); err != nil || v.Status != client.StatusCompleted {
			t.Fatalf("video from the first frame: %+v %v", v, err)
		}

		_, err = c.Upload(ctx, client.File{Part: client.PartImage, Name: "notes.png", Body: strings.NewReader("<svg>not a picture</svg>")})
		if e, ok := client.AsAPIError(err); !ok || e.Status != 415 || e.Code != "unsupported_media_type" || e.RequestID == "" {
			t.Fatalf("upload of text as an image: %v", err)
		}
		_, err = c.Upload(ctx, client.File{Part: client.PartImage, Name: "broken.png", Body: io.MultiReader(bytes.NewReader(png[:100]), failingReader{})})
		if err == nil || !strings.Contains(err.Error(), "read broken.png") || !errors.Is(err, errDisk) {
			t.Fatalf("upload from a failing reader: %v", err)
		}
		if _, err := c.Upload(ctx); err == nil {
			t.Fatal("an upload of nothing was sent")
		}
	})
}

var errDisk = errors.New("disk on fire")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errDisk }

// flaky is a proxy in front of the real server that answers some requests 503 itself: either before
// they reach the server, or after (the server did the work, and the answer is lost on the way back).
type flaky struct {
	mu       sync.Mutex
	attempts []attempt
	// plan decides each request: "pass", "fail" (503 without forwarding) or "lose" (forward, then 503).
	plan func(r *http.Request, n int) string
}

type attempt struct {
	method, path, idemKey string
	status                int // what the client got
	upstream              string
	replayed              bool
}

func startFlaky(t *testing.T, target string, plan func(r *http.Request, n int) string) (*httptest.Server, *flaky) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &flaky{plan: plan}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		n := 0
		for _, a := range f.attempts {
			if a.method == r.Method && a.path == r.URL.Path {
				n++
			}
		}
		f.mu.Unlock()
		a := attempt{method: r.Method, path: r.URL.Path, idemKey: r.Header.Get("Idempotency-Key")}
		switch f.plan(r, n) {
		case "fail":
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "<html>bad gateway day</html>")
			a.status = 503
		case "lose":
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			a.upstream = rec.Body.String()
			w.WriteHeader(http.StatusServiceUnavailable)
			a.status = 503
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"code":"rate_limited","message":"slow down","param":null,"type":"rate_limit_error"}}`)
			a.status = 429
		default:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			a.replayed = rec.Header().Get("Idempotent-Replayed") == "true"
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			a.status = rec.Code
		}
		f.mu.Lock()
		f.attempts = append(f.attempts, a)
		f.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv, f
}

func (f *flaky) of(method, path string) []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []attempt
	for _, a := range f.attempts {
		if a.method == method && a.path == path {
			out = append(out, a)
		}
	}
	return out
}

// TestRetries: a create whose first answer is lost after the server made the task, and whose second
// attempt fails before reaching it, is sent a third time with the same Idempotency-Key and returns the
// one task the first attempt made. GETs are retried too, after Retry-After on 429; refusals, uploads
// and exhausted retries are not.
func TestRetries(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		proxy, f := startFlaky(t, s.URL, func(r *http.Request, n int) string {
			switch {
			case r.Method == "POST" && r.URL.Path == "/v1/videos" && n == 0:
				return "lose"
			case r.Method == "POST" && r.URL.Path == "/v1/videos" && n == 1:
				return "fail"
			case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/videos/") && n == 0:
				return "429"
			case r.URL.Path == "/uploads/v1/files", r.URL.Path == "/v1/models":
				return "fail"
			}
			return "pass"
		})
		acct := s.NewAccount(t, "10")
		c := client.New(proxy.URL, acct.Key, client.WithBackoff(5*time.Millisecond, 20*time.Millisecond), client.WithMaxRetries(3))
		ctx := context.Background()

		v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "through a bad network"})
		if err != nil {
			t.Fatal(err)
		}
		tries := f.of("POST", "/v1/videos")
		if len(tries) != 3 || tries[0].status != 503 || tries[1].status != 503 || tries[2].status != 200 || !tries[2].replayed {
			t.Fatalf("create attempts: %+v; want lost, failed, then a replay", tries)
		}
		if tries[0].idemKey == "" || tries[1].idemKey != tries[0].idemKey || tries[2].idemKey != tries[0].idemKey {
			t.Fatalf("the attempts carried keys %q, %q, %q; want one generated key on all", tries[0].idemKey, tries[1].idemKey, tries[2].idemKey)
		}
		var lost struct{ ID string }
		if err := json.Unmarshal([]byte(tries[0].upstream), &lost); err != nil || lost.ID != v.ID {
			t.Fatalf("the lost answer made %q, the client got %q", lost.ID, v.ID)
		}
		direct := client.New(s.URL, acct.Key, validated(t))
		page, err := direct.List(ctx, client.ListParams{})
		if err != nil || len(page.Data) != 1 {
			t.Fatalf("tasks after a retried create: %+v %v; want exactly one", page, err)
		}
		if es := testkit.Entries(t, s.DB, v.ID); len(es) != 1 {
			t.Fatalf("ledger entries: %v; want one reservation", testkit.Kinds(es))
		}

		if _, err := c.Get(ctx, v.ID); err != nil {
			t.Fatalf("get after a 429: %v", err)
		}
		if gets := f.of("GET", "/v1/videos/"+v.ID); len(gets) != 2 || gets[0].status != 429 || gets[1].status != 200 {
			t.Fatalf("get attempts: %+v", gets)
		}

		// A refusal is an answer, not a hiccup: sent once.
		_, err = c.Create(ctx, client.CreateParams{Model: "videogen-9000", Prompt: "x"})
		if client.ErrorCode(err) != "invalid_model" || len(f.of("POST", "/v1/videos")) != 4 {
			t.Fatalf("a 400 was retried or lost: %v, %d attempts", err, len(f.of("POST", "/v1/videos")))
		}

		// An upload's body cannot be sent twice: one attempt, and the proxy's page is quoted.
		_, err = c.Upload(ctx, client.File{Part: client.PartImage, Name: "a.png", Body: bytes.NewReader(testkit.PNG(t, 8, 8))})
		if e, ok := client.AsAPIError(err); !ok || e.Status != 503 || e.Code != "" || !strings.Contains(e.Message, "bad gateway day") {
			t.Fatalf("upload through a failing proxy: %v", err)
		}
		if n := len(f.of("POST", "/uploads/v1/files")); n != 1 {
			t.Fatalf("upload sent %d times, want once", n)
		}

		// Retries end: 1 + 3 attempts, then the last error.
		if _, err := c.Models(ctx); client.ErrorCode(err) != "" || !strings.Contains(err.Error(), "503") {
			t.Fatalf("models through a proxy that always fails: %v", err)
		}
		if n := len(f.of("GET", "/v1/models")); n != 4 {
			t.Fatalf("models sent %d times, want 4", n)
		}
		none := client.New(proxy.URL, acct.Key, client.WithMaxRetries(0))
		if _, err := none.Models(ctx); err == nil || len(f.of("GET", "/v1/models")) != 5 {
			t.Fatalf("WithMaxRetries(0) retried: %v", err)
		}
	})
}

// TestRetryAfterTheNetworkFails: a connection refused is retried for a GET; the context ends the retries.
func TestRetryAfterTheNetworkFails(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	addr := ln.URL
	ln.Close() // nothing listens there now
	c := client.New(addr, "vg_key", client.WithBackoff(time.Millisecond, 2*time.Millisecond), client.WithMaxRetries(2))
	_, err := c.Get(context.Background(), "video_x")
	if err == nil || client.ErrorCode(err) != "" || !strings.Contains(err.Error(), "GET /v1/videos/video_x") {
		t.Fatalf("get with nothing listening: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Get(ctx, "video_x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("get with a cancelled context: %v", err)
	}
}

// TestDelete: a finished video is deleted and is gone from Get, Download and List, and a second delete
// finds nothing; one its provider has started and cannot stop is refused with its own code.
func TestDelete(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// [sim:slow] takes ten times SIM_DURATION: that video is still generating when it is deleted.
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "1s"})
		c, _ := newClient(t, s)
		ctx := context.Background()

		slow, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "a long take [sim:slow]"})
		if err != nil {
			t.Fatal(err)
		}
		// Started at the simulator, which cannot stop a task: the cancel is refused. (One not yet sent to
		// a provider would be cancelled: handlers' TestCancelQueuedVideo.)
		testkit.Eventually(t, 20*time.Second, "the slow video starts", func() bool {
			got, err := c.Get(ctx, slow.ID)
			return err == nil && got.Status == "in_progress"
		})
		_, err = c.Delete(ctx, slow.ID)
		if e, ok := client.AsAPIError(err); !ok || e.Status != 409 || e.Code != "video_not_finished" || e.RequestID == "" {
			t.Fatalf("delete of an unfinished video: %v", err)
		}

		v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "to be deleted"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Wait(ctx, v.ID, nil); err != nil {
			t.Fatal(err)
		}
		d, err := c.Delete(ctx, v.ID)
		if err != nil || *d != (client.Deleted{ID: v.ID, Object: "video.deleted", Deleted: true}) {
			t.Fatalf("delete: %+v %v", d, err)
		}
		if _, err := c.Get(ctx, v.ID); client.ErrorCode(err) != "not_found" {
			t.Fatalf("get of a deleted video: %v", err)
		}
		if _, err := c.Download(ctx, v.ID, io.Discard); client.ErrorCode(err) != "not_found" {
			t.Fatalf("download of a deleted video: %v", err)
		}
		for got, err := range c.ListAll(ctx, client.ListParams{}) {
			if err != nil || got.ID == v.ID {
				t.Fatalf("list after the delete: %v %v", got, err)
			}
		}
		if _, err := c.Delete(ctx, v.ID); client.ErrorCode(err) != "not_found" {
			t.Fatalf("second delete: %v", err)
		}
	})
}

// TestDeleteRequest checks the request Delete sends and how it reads the answers, against a stand-in
// server: a 409 is not retried, and an OpenAI-style base URL ending in /v1 works.
func TestDeleteRequest(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_delete")
		if r.Method != http.MethodDelete || r.Header.Get("Authorization") != "Bearer vg_key" || r.ContentLength > 0 {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"code":"bad_test_request","message":"`+r.Method+` `+r.URL.Path+`","param":null,"type":"invalid_request_error"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/videos/video_done":
			_, _ = io.WriteString(w, `{"id":"video_done","object":"video.deleted","deleted":true}`)
		case "/v1/videos/video_busy":
			w.WriteHeader(409)
			_, _ = io.WriteString(w, `{"error":{"code":"video_not_finished","message":"still generating","param":null,"type":"conflict_error"}}`)
		default:
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no such video","param":null,"type":"not_found_error"}}`)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL+"/v1/", "vg_key") // an OpenAI-style base URL works too
	d, err := c.Delete(context.Background(), "video_done")
	if err != nil || *d != (client.Deleted{ID: "video_done", Object: "video.deleted", Deleted: true}) {
		t.Fatalf("delete: %+v %v", d, err)
	}
	_, err = c.Delete(context.Background(), "video_busy")
	if e, ok := client.AsAPIError(err); !ok || e.Status != 409 || e.Code != "video_not_finished" || e.RequestID != "req_delete" {
		t.Fatalf("delete of a running video: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (a 409 is not retried)", n)
	}
}

// TestWaitPacesPollsByTheServer: Wait sleeps between polls as long as openai-poll-after-ms asks, and a
// missing, zero, negative or unreadable header neither hammers the server nor is ignored. Only lower
// bounds are asserted: a loaded machine may make the gaps longer, never shorter.
func TestWaitPacesPollsByTheServer(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		polls        int // answers before completed
		want         time.Duration
	}{
		{"as asked", "300", 3, 300 * time.Millisecond},
		{"missing", "", 1, time.Second},
		{"not a number", "soon", 1, time.Second},
		{"zero", "0", 2, 100 * time.Millisecond},
		{"negative", "-5000", 2, 100 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var arrivals []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v1/videos/video_pace" {
					http.NotFound(w, r)
					return
				}
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				n := len(arrivals)
				mu.Unlock()
				status, progress := client.StatusInProgress, 10*n
				if n > tc.polls {
					status, progress = client.StatusCompleted, 100
				}
				w.Header().Set("Content-Type", "application/json")
				if tc.header != "" {
					w.Header().Set("openai-poll-after-ms", tc.header)
				}
				_ = json.NewEncoder(w).Encode(map[string]any{"id": "video_pace", "object": "video", "status": status, "progress": progress})
			}))
			defer srv.Close()

			v, err := client.New(srv.URL, "vg_key").Wait(context.Background(), "video_pace", nil)
			if err != nil || v.Status != client.StatusCompleted {
				t.Fatalf("wait: %+v %v", v, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(arrivals) != tc.polls+1 {
				t.Fatalf("%d polls, want %d", len(arrivals), tc.polls+1)
			}
			// Each arrival is stamped before its answer is written, and the client starts its timer after
			// reading the answer: a gap shorter than the wait means the header was not honoured.
			for i := 1; i < len(arrivals); i++ {
				if gap := arrivals[i].Sub(arrivals[i-1]); gap < tc.want {
					t.Errorf("poll %d came %v after the one before; openai-poll-after-ms %q asks for at least %v", i+1, gap, tc.header, tc.want)
				}
			}
		})
	}
}

// recorder is a transport that keeps the status and headers of every answer, for what the client's
// methods do not return (the content type of a download).
type recorder struct {
	next    http.RoundTripper
	mu      sync.Mutex
	answers map[string]*http.Response // by request URI; bodies are not kept
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		if r.answers == nil {
			r.answers = map[string]*http.Response{}
		}
		r.answers[req.URL.RequestURI()] = &http.Response{StatusCode: resp.StatusCode, Header: resp.Header.Clone()}
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) answer(uri string) *http.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[uri]
}

// TestDownloadVariants: the thumbnail of a completed video downloads as a JPEG and the spritesheet as a
// larger image, both through the OpenAPI check; a variant OpenAI does not define is refused with a typed
// error, never answered with the MP4.
func TestDownloadVariants(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	rec := &recorder{next: testkit.OpenAPITransport(t, nil)}
	c, _ := newClient(t, s, client.WithHTTPClient(&http.Client{Transport: rec}))
	ctx := context.Background()
	v, err := c.Create(ctx, client.CreateParams{Model: model, Prompt: "a lighthouse at dusk"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err = c.Wait(ctx, v.ID, nil); err != nil {
		t.Fatal(err)
	}

	still := func(variant client.Variant) (image.Config, string, string) {
		t.Helper()
		var b bytes.Buffer
		n, err := c.DownloadVariant(ctx, v.ID, variant, &b)
		if err != nil || n != int64(b.Len()) || n == 0 {
			t.Fatalf("download %s: %d bytes (%d buffered): %v", variant, n, b.Len(), err)
		}
		a := rec.answer("/v1/videos/" + v.ID + "/content?variant=" + string(variant))
		if a == nil || a.StatusCode != 200 {
			t.Fatalf("download %s: the request sent was not ?variant=%s: %+v", variant, variant, a)
		}
		cfg, format, err := image.DecodeConfig(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("%s (%s, %d bytes starting %x) is not an image: %v", variant, a.Header.Get("Content-Type"), n, b.Bytes()[:min(n, 8)], err)
		}
		if string(b.Bytes()[4:8]) == "ftyp" {
			t.Fatalf("%s: got the MP4", variant)
		}
		return cfg, format, a.Header.Get("Content-Type") + " " + string(b.Bytes()[:2])
	}
	thumb, format, got := still(client.VariantThumbnail)
	if format != "jpeg" || got != "image/jpeg \xff\xd8" {
		t.Fatalf("thumbnail: %s, content type and first bytes %q; want a JPEG served as image/jpeg", format, got)
	}
	if w, h, ok := strings.Cut(v.Size, "x"); !ok || strconv.Itoa(thumb.Width) != w || strconv.Itoa(thumb.Height) != h {
		t.Fatalf("thumbnail %dx%d; want the video's first frame at %s", thumb.Width, thumb.Height, v.Size)
	}
	sheet, _, got := still(client.VariantSpritesheet)
	if !strings.HasPrefix(got, "image/") || sheet.Width*sheet.Height <= thumb.Width*thumb.Height/4 {
		t.Fatalf("spritesheet %dx%d served as %q; want a grid of frames as an image", sheet.Width, sheet.Height, got)
	}

	_, err = c.DownloadVariant(ctx, v.ID, "poster", io.Discard)
	if e, ok := client.AsAPIError(err); !ok || e.Status != 400 || e.Code != "invalid_request" || e.Param != "variant" || e.RequestID == "" {
		t.Fatalf("an unknown variant: %v", err)
	}
}

// TestDeleteAfterALostAnswer: a delete whose first attempt went through but whose answer was lost is
// retried, finds the video gone (404 not_found) and reports the deletion, since that is what happened.
// A 404 stays an error when no attempt before it can have deleted anything: on a first attempt, and
// after an attempt that never connected.
func TestDeleteAfterALostAnswer(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	deleted := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/v1/videos/")
		mu.Lock()
		calls[id]++
		n, gone := calls[id], deleted[id]
		if r.Method == http.MethodDelete && (id == "video_lost" || id == "video_502") {
			deleted[id] = true
		}
		mu.Unlock()
		switch {
		case r.Method != http.MethodDelete:
			w.WriteHeader(400)
		case id == "video_lost" && n == 1:
			// Deleted, then the connection drops before any answer.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			_ = conn.Close()
		case id == "video_502" && n == 1:
			// Deleted behind a proxy that lost the answer.
			w.WriteHeader(http.StatusBadGateway)
		case gone || id == "video_never":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"No video with this id.","param":null,"type":"invalid_request_error"}}`)
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, "vg_key", client.WithBackoff(5*time.Millisecond, 20*time.Millisecond))
	ctx := context.Background()

	for _, id := range []string{"video_lost", "video_502"} {
		d, err := c.Delete(ctx, id)
		if err != nil || *d != (client.Deleted{ID: id, Object: "video.deleted", Deleted: true}) {
			t.Fatalf("delete of %s, retried after a lost answer: %+v %v", id, d, err)
		}
		mu.Lock()
		n := calls[id]
		mu.Unlock()
		if n != 2 {
			t.Fatalf("delete of %s: %d attempts, want 2", id, n)
		}
	}

	_, err := c.Delete(ctx, "video_never")
	if e, ok := client.AsAPIError(err); !ok || e.Status != 404 || e.Code != "not_found" || client.MayHaveRun(err) {
		t.Fatalf("delete of a video that is not there: %v", err)
	}

	// An attempt that could not connect deleted nothing: the 404 after it is the truth.
	refusedOnce := &failFirst{next: http.DefaultTransport}
	c2 := client.New(srv.URL, "vg_key", client.WithBackoff(5*time.Millisecond, 20*time.Millisecond), client.WithHTTPClient(&http.Client{Transport: refusedOnce}))
	_, err = c2.Delete(ctx, "video_never")
	if client.ErrorCode(err) != "not_found" || refusedOnce.n.Load() != 2 {
		t.Fatalf("delete after a refused connection: %v (%d attempts)", err, refusedOnce.n.Load())
	}
}

// failFirst fails the first request as a refused connection does, before anything is sent.
type failFirst struct {
	next http.RoundTripper
	n    atomic.Int32
}

func (f *failFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if f.n.Add(1) == 1 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return f.next.RoundTrip(req)
}

// TestMayHaveRun: a failed create is certainly not made only when every attempt was refused with a 4xx
// or could not connect; a lost answer or a 5xx, on the last attempt or an earlier one, leaves it open.
func TestMayHaveRun(t *testing.T) {
	var mu sync.Mutex
	var plan []string // what the stand-in does with each create, in turn; "400" once it runs out
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		do := "400"
		if len(plan) > 0 {
			do, plan = plan[0], plan[1:]
		}
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch do {
		case "drop":
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		case "503":
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"error":{"code":"shutting_down","message":"later","param":null,"type":"server_error"}}`)
		case "429":
			w.WriteHeader(429)
			_, _ = io.WriteString(w, `{"error":{"code":"rate_limited","message":"slow down","param":null,"type":"rate_limit_error"}}`)
		default:
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"code":"invalid_model","message":"no","param":"model","type":"invalid_request_error"}}`)
		}
	}))
	defer srv.Close()
	c := client.New(srv.URL, "vg_key", client.WithBackoff(time.Millisecond, 5*time.Millisecond), client.WithMaxRetries(2))
	for _, tc := range []struct {
		plan []string
		want bool
	}{
		{[]string{"400"}, false},
		{[]string{"429", "429", "429"}, false},
		{[]string{"429", "400"}, false},
		{[]string{"503", "503", "503"}, true},
		{[]string{"drop", "drop", "drop"}, true},
		{[]string{"drop", "429", "429"}, true}, // the first may have made the video
		{[]string{"503", "400"}, true},
	} {
		mu.Lock()
		plan = slices.Clone(tc.plan)
		mu.Unlock()
		_, err := c.Create(context.Background(), client.CreateParams{Model: model, Prompt: "x"})
		if err == nil || client.MayHaveRun(err) != tc.want {
			t.Errorf("create answered %v: %v, MayHaveRun %v; want %v", tc.plan, err, client.MayHaveRun(err), tc.want)
		}
	}
	if _, err := c.Create(context.Background(), client.CreateParams{Model: model, Prompt: "x"}); client.ErrorCode(err) != "invalid_model" {
		t.Fatalf("the typed error inside: %v", err)
	}

	// Nothing listening: no attempt connected, so nothing can have been made.
	addr := srv.URL
	srv.Close()
	_, err := client.New(addr, "vg_key", client.WithBackoff(time.Millisecond, 2*time.Millisecond)).Create(context.Background(), client.CreateParams{Model: model, Prompt: "x"})
	if err == nil || client.MayHaveRun(err) {
		t.Fatalf("create with nothing listening: %v, MayHaveRun %v", err, client.MayHaveRun(err))
	}
	if client.MayHaveRun(errors.New("not a request's")) || client.MayHaveRun(nil) {
		t.Fatal("MayHaveRun of an error that is not a request's")
	}
}
