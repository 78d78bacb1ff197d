package mp4synth

import (
	"bytes"
	"io"
)

// flushSize bounds the output buffer; it is what keeps memory independent of
// the frame size (a 1080p I_PCM picture is ~3 MB, we never hold it whole).
const flushSize = 64 << 10

// nalSink receives RBSP bytes and emits NAL unit payload bytes, inserting
// emulation_prevention_three_byte (H.264 7.4.1) so that no start code
// prefix (0x000000..0x000003) can appear inside a NAL unit. With a nil
// writer it only counts, which is how frame sizes are found before moov is
// written.
type nalSink struct {
	w      io.Writer // nil: count only
	buf    []byte
	escape bool  // false only in tests of the raw bit layout
	zeros  int   // consecutive 0x00 bytes at the end of the escaped output
	n      int64 // escaped bytes emitted since the last beginNAL
	err    error // first write error; later writes are dropped
}

// newNALSink returns a sink writing to w through a buffer of bufSize
// bytes, or a counting sink if w is nil.
func newNALSink(w io.Writer, bufSize int) *nalSink {
	s := &nalSink{w: w, escape: true}
	if w != nil {
		s.buf = make([]byte, 0, bufSize)
	}
	return s
}

// beginNAL resets the per-NAL state: emulation prevention never looks
// across NAL boundaries (the length prefix is not part of the NAL unit).
func (s *nalSink) beginNAL() {
	s.zeros = 0
	s.n = 0
}

// endNAL handles the one case trailing bits cannot exclude in general: an
// RBSP ending in 0x00 needs a final 0x03 (7.4.1).
func (s *nalSink) endNAL() {
	if s.escape && s.zeros > 0 {
		s.put(0x03)
		s.zeros = 0
	}
}

func (s *nalSink) writeByte(b byte) {
	if s.escape && s.zeros >= 2 && b <= 3 {
		s.put(0x03)
		s.zeros = 0
	}
	s.put(b)
	if b == 0 {
		s.zeros++
	} else {
		s.zeros = 0
	}
}

// write escapes p. Only two zero bytes in a row can call for an escape, so
// a stretch without zero bytes that does not follow such a pair is copied
// in bulk; I_PCM samples are such stretches, which keeps this fast.
func (s *nalSink) write(p []byte) {
	for len(p) > 0 {
		if s.zeros < 2 {
			i := bytes.IndexByte(p, 0)
			if i < 0 {
				i = len(p)
			}
			if i > 0 {
				s.putBulk(p[:i])
				s.zeros = 0
				p = p[i:]
				continue
			}
		}
		s.writeByte(p[0])
		p = p[1:]
	}
}

// skipPCM accounts for n raw sample bytes without producing them. It is
// exact only because picture.go keeps every sample in [16, 240]: such bytes
// are never zero and never <= 3, so they neither receive nor trigger an
// emulation prevention byte. Write re-checks every NAL size, so a picture
// change that broke this would fail loudly instead of corrupting the file.
func (s *nalSink) skipPCM(n int) {
	s.n += int64(n)
	s.zeros = 0
}

// putRaw writes bytes that are outside any NAL unit (the 4-byte length
// prefix), so they are neither escaped nor counted in n.
func (s *nalSink) putRaw(p []byte) {
	if s.w == nil {
		return
	}
	if len(s.buf)+len(p) > cap(s.buf) {
		s.flush()
	}
	s.buf = append(s.buf, p...)
}

func (s *nalSink) put(b byte) {
	s.n++
	if s.w == nil {
		return
	}
	s.buf = append(s.buf, b)
	if len(s.buf) == cap(s.buf) {
		s.flush()
	}
}

func (s *nalSink) putBulk(p []byte) {
	s.n += int64(len(p))
	if s.w == nil {
		return
	}
	for len(p) > 0 {
		k := copy(s.buf[len(s.buf):cap(s.buf)], p)
		s.buf = s.buf[:len(s.buf)+k]
		p = p[k:]
		if len(s.buf) == cap(s.buf) {
			s.flush()
		}
	}
}

func (s *nalSink) flush() {
	if len(s.buf) == 0 || s.err != nil {
		s.buf = s.buf[:0]
		return
	}
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
	}
	s.buf = s.buf[:0]
}
