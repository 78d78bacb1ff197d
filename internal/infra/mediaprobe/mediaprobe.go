// Package mediaprobe reads what a media file says of itself as it streams past: an image's pixel size
// from its header (JPEG, PNG, WebP), a video's pixel size and duration from its movie header (MP4, MOV:
// ISO base media files), an audio file's duration (MP3 by its frames, WAV by its data chunk, M4A by its
// movie header). Input media are probed once, as they are stored; the upstream simulators probe
// what they fetch the same way (docs/api.md#media-probing).
package mediaprobe

import (
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // registers the formats image.DecodeConfig reads
	_ "image/png"
	"io"

	"github.com/Eyevinn/mp4ff/mp4"
	_ "golang.org/x/image/webp"
)

// Probe is what probing read of a file: an image's pixel size, a video's pixel size and duration, an
// audio file's duration. Zero fields were not found: WebM videos and AAC, Ogg and FLAC audio are not
// probed.
type Probe struct {
	Width, Height int
	DurationMs    int64
}

// maxMovieHeader bounds the movie header (moov) read into memory: it lists every sample's size and
// time, a few hundred KiB for the 100 MiB a video may have; anything larger is not probed.
const maxMovieHeader = 32 << 20

// Prober reads a file as it streams to storage, beside the upload and never failing it: the upload
// writes each chunk to a pipe that a goroutine parses, and the goroutine drains whatever its parser
// does not need, so a write never blocks for long. Finish must be called once the stream ends.
type Prober struct {
	pw   *io.PipeWriter
	done chan struct{}
	res  Probe
}

// parser is the reader of a content type (canonical); nil when the type is not probed.
func parser(contentType string) func(io.Reader) (Probe, error) {
	switch contentType {
	case "image/jpeg", "image/png", "image/webp":
		return Image
	case "video/mp4", "video/quicktime", "audio/mp4":
		return Movie
	case "audio/mpeg":
		return MP3
	case "audio/wav":
		return WAV
	}
	return nil
}

// Read probes a whole file of contentType from r (the simulators' fetched inputs).
func Read(contentType string, r io.Reader) (Probe, error) {
	parse := parser(contentType)
	if parse == nil {
		return Probe{}, fmt.Errorf("%s is not probed", contentType)
	}
	return safely(parse, r)
}

// safely runs a parser on a customer's bytes, turning a decoder's panic into an error: a file nobody
// can read is stored unprobed, never a crash.
func safely(parse func(io.Reader) (Probe, error), r io.Reader) (p Probe, err error) {
	defer func() {
		if v := recover(); v != nil {
			p, err = Probe{}, fmt.Errorf("probe: the decoder gave up: %v", v)
		}
	}()
	return parse(r)
}

// Start starts probing a file of contentType (canonical); nil when the type is not probed (Finish on nil
// returns nothing).
func Start(contentType string) *Prober {
	parse := parser(contentType)
	if parse == nil {
		return nil
	}
	pr, pw := io.Pipe()
	p := &Prober{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		// A file the parser cannot read is stored unprobed: the capability checks skip what is not known.
		p.res, _ = safely(parse, pr)
		_, _ = io.Copy(io.Discard, pr)
	}()
	return p
}

// Write hands a chunk to the parser. It cannot fail: the pipe's reader drains until the writer closes.
func (p *Prober) Write(b []byte) (int, error) {
	_, _ = p.pw.Write(b)
	return len(b), nil
}

// Finish ends the stream and returns what was read (zero for a failed or aborted file).
func (p *Prober) Finish() Probe {
	if p == nil {
		return Probe{}
	}
	_ = p.pw.Close()
	<-p.done
	return p.res
}

// Image reads an image's header (JPEG, PNG, WebP) for its pixel size.
func Image(r io.Reader) (Probe, error) {
	cfg, _, err := image.DecodeConfig(r)
	if err != nil {
		return Probe{}, fmt.Errorf("read image header: %w", err)
	}
	return Probe{Width: cfg.Width, Height: cfg.Height}, nil
}

// Movie walks an ISO base media file's top-level boxes (MP4, MOV) to its movie header, which
// gives the duration and, in the first video track's header, the pixel size. Boxes before it — the
// media data of a file written without "fast start" — are skipped as they stream by.
func Movie(r io.Reader) (Probe, error) {
	var pos uint64
	for {
		hdr, err := mp4.DecodeHeader(r)
		if err != nil {
			return Probe{}, fmt.Errorf("read box header at %d: %w", pos, err)
		}
		if hdr.Name != "moov" {
			skip := int64(hdr.Size) - int64(hdr.Hdrlen)
			if n, err := io.CopyN(io.Discard, r, skip); err != nil {
				return Probe{}, fmt.Errorf("skip %s box at %d (%d of %d bytes): %w", hdr.Name, pos, n, skip, err)
			}
			pos += hdr.Size
			continue
		}
		if hdr.Size > maxMovieHeader {
			return Probe{}, fmt.Errorf("movie header of %d bytes: larger than %d", hdr.Size, maxMovieHeader)
		}
		box, err := mp4.DecodeMoov(hdr, pos, r)
		if err != nil {
			return Probe{}, fmt.Errorf("decode movie header: %w", err)
		}
		return movieProbe(box.(*mp4.MoovBox))
	}
}

func movieProbe(moov *mp4.MoovBox) (Probe, error) {
	var p Probe
	if moov.Mvhd != nil && moov.Mvhd.Timescale > 0 {
		// Bounded first, so that a header claiming an absurd duration cannot overflow the product.
		p.DurationMs = int64(min(moov.Mvhd.Duration, 1<<40) * 1000 / uint64(moov.Mvhd.Timescale))
	}
	for _, trak := range moov.Traks {
		if trak.Tkhd == nil || trak.Mdia == nil || trak.Mdia.Hdlr == nil || trak.Mdia.Hdlr.HandlerType != "vide" {
			continue
		}
		// tkhd holds the presentation size as 16.16 fixed point.
		p.Width, p.Height = int(trak.Tkhd.Width>>16), int(trak.Tkhd.Height>>16)
		break
	}
	if p.Width == 0 && p.DurationMs == 0 {
		return p, errors.New("movie header names no video track and no duration")
	}
	return p, nil
}
