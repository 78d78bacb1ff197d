package imagefit_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
	"io"
	"testing"

	"videogen/internal/infra/imagefit"
)

// TestCover: an image of the size passes byte for byte; another is scaled to cover and centre-cropped to
// exactly the size, as a PNG; one claiming more pixels than MaxPixels is refused before it is decoded.
func TestCover(t *testing.T) {
	encode := func(w, h int) []byte {
		var b bytes.Buffer
		if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	same := encode(640, 360)
	f, err := imagefit.Cover(bytes.NewReader(same), "image/png", 640, 360)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f.Body)
	_ = f.Body.Close()
	if !bytes.Equal(got, same) || f.From != "" {
		t.Fatal("an image of the size was not passed through unchanged")
	}
	for _, c := range []struct{ w, h int }{{300, 900}, {2000, 100}, {333, 333}} {
		f, err := imagefit.Cover(bytes.NewReader(encode(c.w, c.h)), "image/png", 1280, 720)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f.Body)
		_ = f.Body.Close()
		if err != nil || img.Bounds().Dx() != 1280 || img.Bounds().Dy() != 720 || f.ContentType != "image/png" {
			t.Fatalf("%dx%d fitted to %v (%v)", c.w, c.h, img, err)
		}
	}
	// A header claiming 10000x10000: refused without decoding; and a fitted body closed unread ends its
	// encoder (no goroutine left behind, which -race's leak of a blocked writer would show as a hang).
	bomb := append([]byte("\x89PNG\r\n\x1a\n"), ihdr(10000, 10000)...)
	if _, err := imagefit.Cover(bytes.NewReader(bomb), "image/png", 1280, 720); err == nil {
		t.Fatal("a 100-megapixel image was decoded")
	}
	f, err = imagefit.Cover(bytes.NewReader(encode(100, 100)), "image/png", 1280, 720)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Body.Close()
}

func ihdr(w, h int) []byte {
	chunk := make([]byte, 17)
	copy(chunk, "IHDR")
	binary.BigEndian.PutUint32(chunk[4:], uint32(w))
	binary.BigEndian.PutUint32(chunk[8:], uint32(h))
	chunk[12], chunk[13] = 8, 0
	out := binary.BigEndian.AppendUint32(nil, 13)
	out = append(out, chunk...)
	return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(chunk))
}
