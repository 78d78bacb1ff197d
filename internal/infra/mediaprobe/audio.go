package mediaprobe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/go-audio/riff"
	"github.com/tcolgate/mp3"
)

// MP3 counts an MP3 stream's samples frame by frame, reading headers only (no audio is decoded), after
// skipping an ID3v2 tag whose pictures could otherwise pass for frames. Counting frames is exact for
// constant and variable bit rates alike; the encoder's Xing/Info frame carries no audio, and its LAME
// tag's delay and padding are subtracted, so a file encoded from 3.000 s of sound probes as 3.000 s.
func MP3(r io.Reader) (Probe, error) {
	br := bufio.NewReader(r)
	if err := skipID3v2(br); err != nil {
		return Probe{}, err
	}
	dec := mp3.NewDecoder(br)
	var (
		frame      mp3.Frame
		skipped    int
		samples    int64
		frames     int
		sampleRate int64
	)
	for {
		err := dec.Decode(&frame, &skipped)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break // the last frame cut short, or a trailing ID3v1 tag, ends the count
		}
		if err != nil {
			return Probe{}, fmt.Errorf("read MP3 frame %d: %w", frames, err)
		}
		frames++
		if frames == 1 {
			sampleRate = int64(frame.Header().SampleRate())
			if info, trim := gaplessInfo(&frame); info {
				samples -= trim
				continue
			}
		}
		samples += int64(frame.Samples())
	}
	if frames == 0 || sampleRate <= 0 {
		return Probe{}, errors.New("no MP3 frame found")
	}
	return Probe{DurationMs: max(samples, 0) * 1000 / sampleRate}, nil
}

// gaplessInfo reads an encoder's first frame: a Xing or Info header makes it a frame of metadata, not
// sound, and a LAME tag after it gives the samples of encoder delay and padding to take off the count
// (the LAME tag, gabriel.mp3-tech.org/mp3infotag.html: after "Xing"/"Info", 4 bytes of flags, the
// frame count, byte count, TOC and quality each when flagged, then 9 bytes of encoder name and, 21
// bytes in, 12 bits of delay and 12 of padding).
func gaplessInfo(f *mp3.Frame) (info bool, trim int64) {
	b, err := io.ReadAll(io.LimitReader(f.Reader(), 1<<12))
	if err != nil {
		return false, 0
	}
	at := -1
	for _, tag := range []string{"Xing", "Info"} {
		if i := bytes.Index(b[:min(len(b), 64)], []byte(tag)); i >= 0 {
			at = i
		}
	}
	if at < 0 || len(b) < at+8 {
		return false, 0
	}
	flags := binary.BigEndian.Uint32(b[at+4:])
	lame := at + 8
	for bit, size := range []int{4, 4, 100, 4} { // frames, bytes, TOC, quality
		if flags&(1<<bit) != 0 {
			lame += size
		}
	}
	if len(b) < lame+24 {
		return true, 0
	}
	d := b[lame+21:]
	delay, padding := int64(d[0])<<4|int64(d[1]>>4), int64(d[1]&0x0f)<<8|int64(d[2])
	return true, delay + padding
}

// skipID3v2 passes over an ID3v2 tag at the start of the stream: "ID3", version, flags, then the tag's
// size as a 28-bit synchsafe integer, plus 10 bytes of footer when the flags say so (id3.org, ID3v2.4
// structure §3.1).
func skipID3v2(br *bufio.Reader) error {
	hdr, err := br.Peek(10)
	if err != nil || string(hdr[:3]) != "ID3" {
		return nil // no tag (or a file too short to hold one: the frame reader says so)
	}
	size := int64(hdr[6]&0x7f)<<21 | int64(hdr[7]&0x7f)<<14 | int64(hdr[8]&0x7f)<<7 | int64(hdr[9]&0x7f)
	size += 10
	if hdr[5]&0x10 != 0 {
		size += 10
	}
	if _, err := io.CopyN(io.Discard, br, size); err != nil {
		return fmt.Errorf("skip ID3v2 tag of %d bytes: %w", size, err)
	}
	return nil
}

// maxFormatChunk bounds a WAV "fmt " chunk: 16 bytes for PCM, 40 for WAVE_FORMAT_EXTENSIBLE. The reader
// allocates the chunk's declared size, so a larger one is refused before it is read.
const maxFormatChunk = 1 << 10

// WAV reads a RIFF WAVE file's chunks to its data chunk: its size over the format's bytes per second is
// the duration. Chunks between (LIST, fact, bext) are skipped as they stream by.
func WAV(r io.Reader) (Probe, error) {
	p := riff.New(r)
	if err := p.ParseHeaders(); err != nil {
		return Probe{}, fmt.Errorf("read RIFF header: %w", err)
	}
	if p.Format != riff.WavFormatID {
		return Probe{}, fmt.Errorf("RIFF form %q is not WAVE", p.Format[:])
	}
	for {
		ch, err := p.NextChunk()
		if err != nil {
			return Probe{}, fmt.Errorf("read WAVE chunk header: %w", err)
		}
		switch ch.ID {
		case riff.FmtID:
			if ch.Size < 16 || ch.Size > maxFormatChunk {
				return Probe{}, fmt.Errorf("WAVE format chunk of %d bytes", ch.Size)
			}
			if err := ch.DecodeWavHeader(p); err != nil {
				return Probe{}, fmt.Errorf("read WAVE format chunk: %w", err)
			}
		case riff.DataFormatID:
			if p.AvgBytesPerSec == 0 {
				return Probe{}, errors.New("WAVE data chunk before its format chunk")
			}
			return Probe{DurationMs: int64(ch.Size) * 1000 / int64(p.AvgBytesPerSec)}, nil
		default:
			if _, err := io.CopyN(io.Discard, ch, int64(ch.Size)); err != nil {
				return Probe{}, fmt.Errorf("skip WAVE chunk %q: %w", ch.ID[:], err)
			}
		}
	}
}
