package openai_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/openai"
	"videogen/models"
)

const secret = "sk-proj-openai-secret-never-shown"

var cred = upstream.Credential{ID: "oai-1", Kind: "openai", Secret: secret}

// docQueued is the create answer OpenAI's reference shows for POST /videos (openapi.yaml, createVideo's
// x-oaiMeta example, commit f85dbe2 of openai/openai-openapi, read 2026-11-26), verbatim.
const docQueued = `{
  "id": "video_123",
  "object": "video",
  "model": "sora-2",
  "status": "queued",
  "progress": 0,
  "created_at": 1712697600,
  "size": "1024x1792",
  "seconds": "8",
  "quality": "standard"
}`

// recorded is one request as it reached the recorder.
type recorded struct {
	method, path, query string
	header              http.Header
	body                []byte
}

// answer is a canned reply: status, headers and body, as the provider sent them.
type answer struct {
	status int
	header map[string]string
	body   string
}

// recorder is an OpenAI endpoint that records what it gets and answers each "METHOD path" with its
// canned answer (a VideoResource for a create when none is given).
type recorder struct {
	mu      sync.Mutex
	got     []recorded
	answers map[string]answer
}

func (p *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.got = append(p.got, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), b})
	a, ok := p.answers[r.Method+" "+r.URL.Path]
	p.mu.Unlock()
	if !ok {
		a = answer{status: 200, body: docQueued}
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (p *recorder) requests() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

func serve(t *testing.T, answers map[string]answer) (*recorder, *openai.Client) {
	t.Helper()
	p := &recorder{answers: answers}
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	return p, openai.New(hs.URL, 5*time.Second)
}

// media serves the first frames the adapter reads, as our media store does: without credentials.
func media(t *testing.T, files map[string][]byte) (string, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var auth []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(b)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &auth
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func submitReq(prompt string, seconds int, size string) upstream.SubmitRequest {
	return upstream.SubmitRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: prompt, Seconds: seconds, Size: size},
		UpstreamModel: "sora-2", UpstreamSize: size, IdempotencyKey: "idem-" + prompt}
}

// TestRequestsMatchSpec: every create the adapter sends — text alone, and with a first frame, at each
// duration and size OpenAI renders — is valid against OpenAI's published spec (testdata/openapi-videos.yaml:
// CreateVideoJsonBody, CreateVideoMultipartBody, closed to other fields) and carries only model, prompt,
// seconds, size and input_reference; polls and downloads are the spec's operations too.
func TestRequestsMatchSpec(t *testing.T) {
	ctx := context.Background()
	check := mustSpec(t)
	// A first frame of each size, as Sora takes it (the video's own size), passes through byte for byte.
	frames := map[string][]byte{}
	files := map[string][]byte{}
	for _, size := range []string{"720x1280", "1280x720", "1024x1792", "1792x1024"} {
		var w, h int
		fmt.Sscanf(size, "%dx%d", &w, &h)
		frames[size] = append(pngHeader(w, h), randomBytes(300<<10)...)
		files["/f/"+size+".png"] = frames[size]
	}
	mediaURL, mediaAuth := media(t, files)

	type create struct {
		name       string
		req        upstream.SubmitRequest
		firstFrame bool
	}
	var cases []create
	// VideoSeconds and VideoSize of the spec: "4", "8", "12" × 720x1280, 1280x720, 1024x1792, 1792x1024.
	for _, secs := range []int{4, 8, 12} {
		for _, size := range []string{"720x1280", "1280x720", "1024x1792", "1792x1024"} {
			name := fmt.Sprintf("%ds %s", secs, size)
			cases = append(cases, create{"text " + name, submitReq("a harbour at dawn", secs, size), false})
			r := submitReq("the harbour wakes", secs, size)
			r.StartImageURL = mediaURL + "/f/" + size + ".png"
			cases = append(cases, create{"first frame " + name, r, true})
		}
	}
	// A request with everything else our API takes: none of it may leave. The size sent is the one the
	// platform mapped (UpstreamSize), never the size sold.
	seed := int64(42)
	full := submitReq("all the knobs", 8, "1280x720")
	full.Size, full.AspectRatio, full.GenerateAudio, full.Watermark, full.Seed = "960x960", "1:1", false, true, &seed
	full.Expires = time.Hour
	cases = append(cases, create{"other fields left out", full, false})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, c := serve(t, nil)
			st, err := c.Submit(ctx, cred, tc.req)
			if err != nil || st.ID != "video_123" || st.State != upstream.StateQueued {
				t.Fatalf("submit: %+v %v", st, err)
			}
			got := p.requests()
			if len(got) != 1 {
				t.Fatalf("%d requests, want 1", len(got))
			}
			r := got[0]
			if r.method != http.MethodPost || r.path != "/v1/videos" {
				t.Fatalf("sent %s %s, want POST /v1/videos", r.method, r.path)
			}
			if r.header.Get("Authorization") != "Bearer "+secret || r.header.Get("Idempotency-Key") != tc.req.IdempotencyKey {
				t.Fatalf("headers %v", r.header)
			}
			if msg := check.checkRequest(r.method, r.path, r.query, r.header, r.body); msg != "" {
				t.Fatalf("the create is not valid against OpenAI's spec: %s\nbody: %.300s", msg, r.body)
			}
			fields, file := decodeCreate(t, r)
			want := map[string]string{"model": "sora-2", "prompt": tc.req.Prompt, "seconds": strconv.Itoa(tc.req.Seconds), "size": tc.req.UpstreamSize}
			if !mapsEqual(fields, want) {
				t.Fatalf("fields %v, want exactly %v", fields, want)
			}
			if tc.firstFrame {
				frame := frames[tc.req.UpstreamSize]
				if file == nil || !bytes.Equal(file.data, frame) || file.contentType != "image/png" || file.filename != "first_frame.png" {
					t.Fatalf("input_reference: %+v, want the %d bytes of the first frame as first_frame.png, image/png", file, len(frame))
				}
			} else if file != nil {
				t.Fatalf("an input_reference was sent without a first frame")
			}
		})
	}
	for _, a := range *mediaAuth {
		if a != "" {
			t.Fatalf("the media store got Authorization %q: the key must never leave for another host", a)
		}
	}

	t.Run("poll and downloads", func(t *testing.T) {
		p, c := serve(t, map[string]answer{
			"GET /v1/videos/video_123":         {200, nil, docQueued},
			"GET /v1/videos/video_123/content": {200, map[string]string{"Content-Type": "video/mp4"}, "mp4!"},
		})
		if _, err := c.Poll(ctx, cred, "video_123"); err != nil {
			t.Fatal(err)
		}
		body, size, err := c.Download(ctx, cred, "video_123")
		if err != nil || string(readAll(t, body)) != "mp4!" || size != 4 {
			t.Fatalf("download: size %d, %v", size, err)
		}
		_ = body.Close()
		for _, v := range []string{"thumbnail", "spritesheet"} {
			body, _, _, err := c.DownloadStill(ctx, cred, "video_123", v)
			if err != nil {
				t.Fatal(err)
			}
			_ = body.Close()
		}
		var queries []string
		for _, r := range p.requests() {
			if msg := check.checkRequest(r.method, r.path, r.query, r.header, r.body); msg != "" {
				t.Errorf("%s %s?%s is not valid against OpenAI's spec: %s", r.method, r.path, r.query, msg)
			}
			queries = append(queries, r.query)
		}
		if want := []string{"", "variant=video", "variant=thumbnail", "variant=spritesheet"}; !slices.Equal(queries, want) {
			t.Fatalf("queries %q, want %q", queries, want)
		}
	})
}

type filePart struct {
	filename, contentType string
	data                  []byte
}

// decodeCreate reads a create body, JSON or multipart, into its text fields and its file part.
func decodeCreate(t *testing.T, r recorded) (map[string]string, *filePart) {
	t.Helper()
	ctype, params, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	switch ctype {
	case "application/json":
		var m map[string]any
		if err := json.Unmarshal(r.body, &m); err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			s, ok := v.(string)
			if !ok {
				t.Fatalf("field %s is %T, want a string (VideoSeconds and VideoSize are string enums)", k, v)
			}
			fields[k] = s
		}
		return fields, nil
	case "multipart/form-data":
		var file *filePart
		mr := multipart.NewReader(bytes.NewReader(r.body), params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				return fields, file
			}
			if err != nil {
				t.Fatal(err)
			}
			b := readAll(t, part)
			if part.FileName() != "" {
				file = &filePart{part.FileName(), part.Header.Get("Content-Type"), b}
				continue
			}
			fields[part.FormName()] = string(b)
		}
	}
	t.Fatalf("content type %q", ctype)
	return nil, nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRefusedBeforeSending: what OpenAI's create cannot take fails the task (ErrRejected) with a reason,
// and OpenAI is never called. The platform's capability check refuses these before billing; this is the
// last guard.
func TestRefusedBeforeSending(t *testing.T) {
	base := submitReq("x", 8, "1280x720")
	cases := []struct {
		name   string
		change func(*upstream.SubmitRequest)
		says   string
	}{
		{"last frame", func(r *upstream.SubmitRequest) { r.EndImageURL = "https://m/last.png" }, "last_frame"},
		{"reference images", func(r *upstream.SubmitRequest) { r.ImageURLs = []string{"https://m/r.png"} }, "reference_images"},
		{"reference videos", func(r *upstream.SubmitRequest) { r.VideoURLs = []string{"https://m/v.mp4"} }, "reference_videos"},
		{"reference audio", func(r *upstream.SubmitRequest) { r.AudioURLs = []string{"https://m/a.mp3"} }, "reference_audio"},
		{"5 seconds", func(r *upstream.SubmitRequest) { r.Seconds = 5 }, "4, 8 or 12 seconds, not 5"},
		{"15 seconds", func(r *upstream.SubmitRequest) { r.Seconds = 15 }, "not 15"},
		{"size outside the enum", func(r *upstream.SubmitRequest) { r.UpstreamSize = "1920x1080" }, `"1920x1080"`},
		{"no size mapped", func(r *upstream.SubmitRequest) { r.UpstreamSize = "" }, `size ""`},
		{"the sold size is not sent", func(r *upstream.SubmitRequest) { r.Size, r.UpstreamSize = "1280x720", "864x496" }, `"864x496"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, c := serve(t, nil)
			r := base
			tc.change(&r)
			_, err := c.Submit(context.Background(), cred, r)
			if !errors.Is(err, upstream.ErrRejected) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want ErrRejected saying %q", err, tc.says)
			}
			if n := len(p.requests()); n != 0 {
				t.Fatalf("OpenAI was called %d times", n)
			}
		})
	}
}

// TestFirstFrameStreamed: the first frame goes to OpenAI as it is read from the media store. The store
// sends half the image and waits until OpenAI has received part of the file; an adapter that read the
// image whole before sending would never get the rest, and the submit would time out.
func TestFirstFrameStreamed(t *testing.T) {
	half := append(pngHeader(720, 1280), randomBytes(256<<10)...)
	reached := make(chan struct{})
	var once sync.Once
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(half)
		w.(http.Flusher).Flush()
		select {
		case <-reached:
		case <-time.After(4 * time.Second):
			return // the adapter buffered: end the image short, and the check below fails
		}
		_, _ = w.Write(half)
	}))
	defer store.Close()
	var got int64
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mr, err := r.MultipartReader()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			if part.FormName() != "input_reference" {
				continue
			}
			buf := make([]byte, 32<<10)
			for {
				n, err := part.Read(buf)
				got += int64(n)
				if got > 0 {
					once.Do(func() { close(reached) })
				}
				if err != nil {
					break
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, docQueued)
	}))
	defer provider.Close()
	r := submitReq("streamed", 4, "720x1280")
	r.StartImageURL = store.URL + "/frame.png"
	if _, err := openai.New(provider.URL, 10*time.Second).Submit(context.Background(), cred, r); err != nil {
		t.Fatal(err)
	}
	if got != int64(2*len(half)) {
		t.Fatalf("OpenAI received %d bytes of the first frame, want %d", got, 2*len(half))
	}
}

// TestFirstFrameUnreadable: a first frame the media store does not serve is a transient failure (the
// worker signs the task's media afresh for the next attempt), and OpenAI is not called.
func TestFirstFrameUnreadable(t *testing.T) {
	p, c := serve(t, nil)
	mediaURL, _ := media(t, nil)
	r := submitReq("no frame", 4, "720x1280")
	r.StartImageURL = mediaURL + "/gone.png"
	if _, err := c.Submit(context.Background(), cred, r); !errors.Is(err, upstream.ErrTransient) {
		t.Fatalf("%v, want ErrTransient", err)
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("OpenAI was called %d times", n)
	}
}

// pngHeader is the start of a PNG of w×h — its signature and IHDR chunk, all a header reader needs —
// so that a frame can be any size of bytes after it.
func pngHeader(w, h int) []byte {
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[8:], uint32(h))
	ihdr[12], ihdr[13] = 8, 2 // 8-bit RGB
	out := []byte("\x89PNG\r\n\x1a\n")
	out = binary.BigEndian.AppendUint32(out, 13)
	out = append(out, ihdr...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(ihdr))
}

// TestFirstFrameCropped: a first frame of another size than the video's is scaled to cover the size and
// centre-cropped to it before it is sent, as a PNG of exactly that size, and the submission says so for
// the task log.
func TestFirstFrameCropped(t *testing.T) {
	square := image.NewRGBA(image.Rect(0, 0, 1000, 1000))
	for y := 0; y < 1000; y++ {
		for x := 0; x < 1000; x++ {
			c := color.RGBA{0, 0, 255, 255} // blue edges, cropped away at 16:9
			if y >= 200 && y < 800 {
				c = color.RGBA{255, 0, 0, 255}
			}
			square.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, square); err != nil {
		t.Fatal(err)
	}
	mediaURL, _ := media(t, map[string][]byte{"/f/square.png": buf.Bytes()})
	p, c := serve(t, nil)
	r := submitReq("cropped", 4, "1280x720")
	r.StartImageURL = mediaURL + "/f/square.png"
	st, err := c.Submit(context.Background(), cred, r)
	if err != nil {
		t.Fatal(err)
	}
	if st.Conformed != "first frame cropped to 1280x720 (from 1000x1000) to match the video's size" {
		t.Fatalf("conformed %q", st.Conformed)
	}
	_, file := decodeCreate(t, p.requests()[0])
	img, err := png.Decode(bytes.NewReader(file.data))
	if err != nil || file.contentType != "image/png" {
		t.Fatalf("sent %s: %v", file.contentType, err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 720 {
		t.Fatalf("sent a %dx%d frame", b.Dx(), b.Dy())
	}
	for _, pt := range []image.Point{{0, 0}, {1279, 719}, {640, 360}} {
		if r, _, b, _ := img.At(pt.X, pt.Y).RGBA(); r>>8 < 200 || b>>8 > 50 {
			t.Fatalf("pixel %v is %v: the crop kept what it should have cut", pt, img.At(pt.X, pt.Y))
		}
	}
}
