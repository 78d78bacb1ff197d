// Package imagefit conforms an image to an exact pixel size, for providers that take a first frame only
// at the video's own size (Sora: "Inpaint image must match the requested width and height"). The fit
// rule is "cover": the image is scaled to cover the size and centre-cropped to it, so nothing is
// stretched and no bars are added (docs/upstreams.md#openai).
package imagefit

import (
	"bytes"
	"fmt"
	"image"
	_ "image/jpeg" // the formats an input image may have
	"image/png"
	"io"

	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp"
)

// MaxPixels bounds the images Cover decodes (width × height): a small, highly compressed file may
// claim a huge size, and decoding it would take gigabytes. 40 megapixels is more than any camera frame
// a customer sends as a first frame.
const MaxPixels = 40_000_000

// Fitted is an image conformed to a size: its bytes as a stream, their type, and what was done. Body
// must be closed: a conformed image is encoded while it is read, and closing ends the encoder.
type Fitted struct {
	Body        io.ReadCloser
	ContentType string
	// From is the image's own size when it was cropped ("1024x1024"); empty when it already had the
	// size and is passed through unchanged.
	From string
}

// Cover conforms the image read from r (of contentType) to w×h. An image of that size already is passed
// through byte for byte, having read only its header; any other is decoded (one frame in memory),
// scaled to cover w×h, centre-cropped to it, and re-encoded as PNG while it is read.
func Cover(r io.Reader, contentType string, w, h int) (*Fitted, error) {
	var head bytes.Buffer
	cfg, _, err := image.DecodeConfig(io.TeeReader(r, &head))
	if err != nil {
		return nil, fmt.Errorf("read the image's header: %w", err)
	}
	whole := io.MultiReader(&head, r)
	if cfg.Width == w && cfg.Height == h {
		return &Fitted{Body: io.NopCloser(whole), ContentType: contentType}, nil
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return nil, fmt.Errorf("the image is %dx%d, more than %d pixels", cfg.Width, cfg.Height, MaxPixels)
	}
	src, _, err := image.Decode(whole)
	if err != nil {
		return nil, fmt.Errorf("decode the image: %w", err)
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, coverRect(src.Bounds(), w, h), draw.Src, nil)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(png.Encode(pw, dst)) }()
	return &Fitted{Body: pr, ContentType: "image/png", From: fmt.Sprintf("%dx%d", cfg.Width, cfg.Height)}, nil
}

// coverRect is the centred part of b with the aspect ratio of w×h: the whole height of a wider image,
// the whole width of a taller one.
func coverRect(b image.Rectangle, w, h int) image.Rectangle {
	bw, bh := b.Dx(), b.Dy()
	if bw*h > bh*w { // wider than w:h: keep the height
		cw := (bh*w + h/2) / h
		x0 := b.Min.X + (bw-cw)/2
		return image.Rect(x0, b.Min.Y, x0+cw, b.Max.Y)
	}
	ch := (bw*h + w/2) / w
	y0 := b.Min.Y + (bh-ch)/2
	return image.Rect(b.Min.X, y0, b.Max.X, y0+ch)
}
