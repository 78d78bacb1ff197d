// Package stills makes the still images served beside a finished video, as the OpenAI video API names
// them: the thumbnail (the first frame) and the spritesheet (a grid of frames spread over the video).
// They are made once, when the worker copies the output, and kept with it (docs/api.md#variants).
package stills

import (
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"mime"
	"strings"

	"golang.org/x/image/draw"
)

// The variants of GET /v1/videos/{id}/content besides the video itself.
const (
	Thumbnail   = "thumbnail"
	Spritesheet = "spritesheet"
	// LastFrame is the video's last frame as the provider returned it (where it returns one: Ark's
	// return_last_frame); never made here.
	LastFrame = "last_frame"
)

// Variants lists the still variants in the order they are made.
var Variants = []string{Thumbnail, Spritesheet}

// The spritesheet is SheetColumns x SheetRows tiles of TileWidth pixels across, frames taken at even
// intervals from the first; a video with fewer frames leaves the last tiles black.
const (
	SheetColumns = 4
	SheetRows    = 4
	TileWidth    = 256
	// MaxBytes bounds a still fetched from a provider: a picture, not a video.
	MaxBytes = 32 << 20
)

// jpegQuality keeps a 1080p thumbnail near 100 KiB with no visible loss on generated footage.
const jpegQuality = 85

// ContentTypes are the image types a still may be stored and served as, by file extension.
var ContentTypes = map[string]string{".jpg": "image/jpeg", ".png": "image/png", ".webp": "image/webp"}

// ExtensionFor returns the file extension a still of the given Content-Type is stored under, or an error
// when it is not an image type we serve.
func ExtensionFor(contentType string) (string, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", fmt.Errorf("content type %q: %w", contentType, err)
	}
	for ext, ct := range ContentTypes {
		if ct == mt {
			return ext, nil
		}
	}
	return "", fmt.Errorf("content type %q is not a still image type we serve", contentType)
}

// ContentTypeOf returns the Content-Type of a still stored under key ("" when the key has none of the
// extensions in ContentTypes).
func ContentTypeOf(key string) string {
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return ContentTypes[key[i:]]
	}
	return ""
}

// SheetFrames returns which of total frames the spritesheet shows: SheetColumns*SheetRows of them (or
// every frame of a shorter video), evenly spaced from the first.
func SheetFrames(total int) []int {
	tiles := SheetColumns * SheetRows
	n := min(total, tiles)
	out := make([]int, n)
	for i := range n {
		out[i] = i * total / n
	}
	return out
}

// TileSize is the size of one spritesheet tile for a video of the given size: TileWidth across (or the
// video's width when narrower) and the height that keeps the aspect ratio, rounded to even.
func TileSize(width, height int) (int, int) {
	w := min(TileWidth, width)
	h := max(2, (height*w/width+1)&^1)
	return w, h
}

// EncodeThumbnail writes img as the thumbnail: a JPEG at the video's own size.
func EncodeThumbnail(w io.Writer, img image.Image) error {
	if err := jpeg.Encode(w, img, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return fmt.Errorf("encode thumbnail: %w", err)
	}
	return nil
}

// EncodeSpritesheet writes the spritesheet of a width x height video of total frames: the frames
// SheetFrames gives, each asked of frame at TileSize (or scaled to it when frame gives another size) and
// placed left to right, top to bottom. Frames are asked for one at a time.
func EncodeSpritesheet(w io.Writer, width, height, total int, frame func(n, w, h int) (image.Image, error)) error {
	tw, th := TileSize(width, height)
	sheet := image.NewRGBA(image.Rect(0, 0, tw*SheetColumns, th*SheetRows))
	draw.Draw(sheet, sheet.Bounds(), image.Black, image.Point{}, draw.Src)
	for i, n := range SheetFrames(total) {
		img, err := frame(n, tw, th)
		if err != nil {
			return fmt.Errorf("spritesheet frame %d: %w", n, err)
		}
		x, y := i%SheetColumns*tw, i/SheetColumns*th
		tile := image.Rect(x, y, x+tw, y+th)
		if img.Bounds().Size() == tile.Size() {
			draw.Draw(sheet, tile, img, img.Bounds().Min, draw.Src)
		} else {
			draw.BiLinear.Scale(sheet, tile, img, img.Bounds(), draw.Src, nil)
		}
	}
	if err := jpeg.Encode(w, sheet, &jpeg.Options{Quality: jpegQuality}); err != nil {
		return fmt.Errorf("encode spritesheet: %w", err)
	}
	return nil
}
