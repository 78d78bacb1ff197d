package testkit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"testing"

	"videogen/internal/domain/media"
	"videogen/internal/domain/upstream/sim/mp4synth"
)

// PNG returns a real w×h PNG image.
func PNG(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, gradient(w, h)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// JPEG returns a real w×h JPEG image.
func JPEG(t testing.TB, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, gradient(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gradient(w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), 128, 255})
		}
	}
	return img
}

// WAV returns a real 16-bit mono PCM WAV file of n samples at 8 kHz.
func WAV(n int) []byte {
	var buf bytes.Buffer
	data := n * 2
	buf.WriteString("RIFF")
	_ = binary.Write(&buf, binary.LittleEndian, uint32(36+data))
	buf.WriteString("WAVEfmt ")
	// PCM format chunk: 16 bytes, format 1, mono, 8 kHz, 16,000 bytes a second, 2-byte frames, 16 bits.
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(8000), uint32(16000), uint16(2), uint16(16)} {
		_ = binary.Write(&buf, binary.LittleEndian, v)
	}
	buf.WriteString("data")
	_ = binary.Write(&buf, binary.LittleEndian, uint32(data))
	for i := 0; i < n; i++ {
		_ = binary.Write(&buf, binary.LittleEndian, int16(i%200*100))
	}
	return buf.Bytes()
}

// mp4Head is the start of an ISO MP4 file (an ftyp box), enough for its type to be recognised.
var mp4Head = []byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2")

// MP4Stream returns a reader of an n-byte file that is an MP4 by its bytes (an ftyp box, then filler):
// large uploads are generated while they are sent, never held in memory.
func MP4Stream(n int64) io.Reader {
	return io.MultiReader(bytes.NewReader(mp4Head), io.LimitReader(Zeros{}, n-int64(len(mp4Head))))
}

// PNGStream is MP4Stream for a PNG signature: an n-byte file whose type is image/png.
func PNGStream(n int64) io.Reader {
	head := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x02\x00\x00\x00\x90\x91\x68\x36")
	return io.MultiReader(bytes.NewReader(head), io.LimitReader(Zeros{}, n-int64(len(head))))
}

// Zeros reads as an endless run of zero bytes (filler for generated files).
type Zeros struct{}

func (Zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Part is one file of an upload.
type Part struct {
	Name     string // input_reference, image_files, video_files, audio_files (or anything, to test refusals)
	Filename string
	Body     io.Reader
}

// File is a Part from bytes.
func File(name, filename string, b []byte) Part {
	return Part{Name: name, Filename: filename, Body: bytes.NewReader(b)}
}

// Upload sends parts to POST /uploads/v1/files as a streamed (chunked) multipart body and returns the
// answer. query is appended to the path as is ("?model=…" or "").
func (s *Server) Upload(t testing.TB, key, query string, parts ...Part) *Resp {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, p := range parts {
			w, err := mw.CreateFormFile(p.Name, p.Filename)
			if err == nil {
				_, err = io.Copy(w, p.Body)
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
		_ = pw.CloseWithError(mw.Close())
	}()
	// The body streams (uploads in tests run to hundreds of megabytes, and some tests measure the heap);
	// up to 1 MiB of it is kept so that the exchange is checked against the OpenAPI document, request and
	// answer. A larger body is not kept: its answer alone is checked.
	kept := &cappedBuffer{limit: 1 << 20}
	req, err := http.NewRequest("POST", s.URL+"/uploads/v1/files"+query, io.TeeReader(pr, kept))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	defer resp.Body.Close()
	_ = pr.CloseWithError(io.ErrClosedPipe) // the server may answer before reading everything
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("upload: read answer: %v", err)
	}
	r := &Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if !kept.over {
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(kept.buf.Bytes())), nil }
	}
	checkOpenAPI(t, req, r)
	return r
}

// cappedBuffer keeps what is written to it up to limit bytes, and notes when more came.
type cappedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.over || c.buf.Len()+len(p) > c.limit {
		c.over = true
		c.buf = bytes.Buffer{} // let the memory go
		return len(p), nil
	}
	return c.buf.Write(p)
}

// Answer decodes an upload or import answer, requiring a 200.
func (r *Resp) Answer(t testing.TB) media.Answer {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("want 200, got %d: %s", r.Status, truncate(r.Body))
	}
	var a media.Answer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("answer: %v: %s", err, truncate(r.Body))
	}
	return a
}

// MediaOnDisk counts the media files stored under the server's DATA_DIR (local storage) and the rows of
// the media table: both must be 0 after a refused upload.
func (s *Server) MediaOnDisk(t testing.TB) (files, rows int) {
	t.Helper()
	root := filepath.Join(s.Cfg.DataDir, "media")
	err := filepath.Walk(root, func(_ string, info os.FileInfo, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !info.IsDir() {
			files++
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	var n int64
	if err := s.DB.R.Table("media").Count(&n).Error; err != nil {
		t.Fatal(fmt.Errorf("count media rows: %w", err))
	}
	return files, int(n)
}

// ProviderMedia serves input files as a customer's storage would, each one a provider takes as it is:
// *.png a 640x640 image, *.mp4 a 640x640 video of 3 s (within Seedance's reference limits: 409,600 to
// 927,408 pixels, 2 to 15 s), *.mp3 an MP3 of 3 s; anything else 404. It returns the base URL.
func ProviderMedia(t testing.TB) string {
	t.Helper()
	var movie bytes.Buffer
	if _, err := mp4synth.Write(&movie, mp4synth.Params{Width: 640, Height: 640, Seconds: 3}); err != nil {
		t.Fatal(err)
	}
	files := map[string]struct {
		ctype string
		body  []byte
	}{
		".png": {"image/png", PNG(t, 640, 640)},
		".mp4": {"video/mp4", movie.Bytes()},
		".mp3": {"audio/mpeg", Tone(t, "3s.mp3")},
	}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := files[path.Ext(r.URL.Path)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.ctype)
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}
