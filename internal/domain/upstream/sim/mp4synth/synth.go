package mp4synth

import (
	"encoding/binary"
	"fmt"
	"io"
)

// nalLengthSize is the size of the length prefix of each NAL unit in mdat
// (avcC lengthSizeMinusOne = 3).
const nalLengthSize = 4

// plan is everything decided before the first byte is written: the moov
// box precedes mdat, so it needs every sample size up front.
type plan struct {
	p            Params
	geo          geometry
	frameNumBits uint
	layout       mp4Layout
	sizes        []uint32
}

// newPlan validates p and runs the sizing pass: every frame is encoded in
// count-only mode (headers and skip runs are produced, PCM samples only
// counted), which costs little and keeps memory independent of length.
func newPlan(p Params) (*plan, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	pl := &plan{p: p, geo: newGeometry(p.Width, p.Height)}
	frames := p.frames()
	pl.frameNumBits = log2MaxFrameNum(frames)

	enc := newFrameEncoder(newScene(pl.geo, p.FPS, p.Seed), pl.frameNumBits, newNALSink(nil, 0))
	pl.sizes = make([]uint32, frames)
	for n := range frames {
		size := enc.encode(n) + nalLengthSize
		if size > 1<<32-1 {
			return nil, fmt.Errorf("mp4synth: frame %d is %d bytes, over the 32-bit sample size limit", n, size)
		}
		pl.sizes[n] = uint32(size)
	}

	level := chooseLevel(pl.geo.mbw, pl.geo.mbh, p.FPS, peakBitsPerSecond(pl.sizes, p.FPS))
	pl.layout = buildLayout(&mp4Track{
		width: p.Width, height: p.Height,
		fps: p.FPS, seconds: p.Seconds,
		sizes:   pl.sizes,
		sps:     buildSPS(pl.geo, p.FPS, level, pl.frameNumBits),
		pps:     buildPPS(),
		profile: profileBaseline, compat: constraintFlags, level: level,
	})
	return pl, nil
}

// Size returns the exact byte size Write would produce for p, without
// producing the file (for Content-Length). It costs a fraction of Write:
// only the sizing pass runs, no samples are rendered.
func Size(p Params) (int64, error) {
	pl, err := newPlan(p)
	if err != nil {
		return 0, err
	}
	return pl.layout.size(), nil
}

// Write writes a complete MP4 file to w and returns the number of bytes
// written. The file has ftyp, then moov, then mdat ("fast start"), one
// H.264 Constrained Baseline video track, no audio, and exactly
// Seconds*FPS frames at FPS frames per second. w need not be seekable.
//
// Memory stays around 100 KiB for any size and length (4 bytes per frame
// for the sample table, a few bytes per pixel column and row for the
// background, a 64 KiB output buffer): frames are never held in memory but
// rendered macroblock by macroblock straight into the output buffer.
func Write(w io.Writer, p Params) (int64, error) {
	pl, err := newPlan(p)
	if err != nil {
		return 0, err
	}
	cw := &countingWriter{w: w}
	if _, err := cw.Write(pl.layout.header); err != nil {
		return cw.n, fmt.Errorf("mp4synth: write header: %w", err)
	}

	sink := newNALSink(cw, flushSize)
	enc := newFrameEncoder(newScene(pl.geo, pl.p.FPS, pl.p.Seed), pl.frameNumBits, sink)
	var prefix [nalLengthSize]byte
	for n, size := range pl.sizes {
		want := int64(size) - nalLengthSize
		binary.BigEndian.PutUint32(prefix[:], uint32(want))
		sink.putRaw(prefix[:])
		if got := enc.encode(n); got != want {
			// The length prefix and moov are already out; a mismatch
			// means the sizing pass and the real pass diverged.
			return cw.n, fmt.Errorf("mp4synth: frame %d: encoded %d bytes, planned %d", n, got, want)
		}
		if sink.err != nil {
			return cw.n, fmt.Errorf("mp4synth: write frame %d: %w", n, sink.err)
		}
	}
	sink.flush()
	if sink.err != nil {
		return cw.n, fmt.Errorf("mp4synth: write end of mdat: %w", sink.err)
	}
	if cw.n != pl.layout.size() {
		return cw.n, fmt.Errorf("mp4synth: wrote %d bytes, planned %d", cw.n, pl.layout.size())
	}
	return cw.n, nil
}

// countingWriter counts bytes for Write's result, including those of a
// failed partial write.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
