package mp4synth

import (
	"bytes"
	"testing"
)

// bitReader is the test-side inverse of bitWriter, used to check that
// written syntax elements read back as the spec defines them.
type bitReader struct {
	b   []byte
	pos int // bit position
}

func (r *bitReader) u(t *testing.T, n int) uint32 {
	t.Helper()
	var v uint32
	for range n {
		if r.pos >= 8*len(r.b) {
			t.Fatalf("bitReader: read past end (%d bytes)", len(r.b))
		}
		bit := r.b[r.pos/8] >> (7 - r.pos%8) & 1
		v = v<<1 | uint32(bit)
		r.pos++
	}
	return v
}

func (r *bitReader) flag(t *testing.T) bool { t.Helper(); return r.u(t, 1) == 1 }

func (r *bitReader) ue(t *testing.T) uint32 {
	t.Helper()
	zeros := 0
	for r.u(t, 1) == 0 {
		zeros++
		if zeros > 31 {
			t.Fatal("bitReader: ue with more than 31 leading zeros")
		}
	}
	return uint32((uint64(1)<<zeros - 1) + uint64(r.u(t, zeros)))
}

func (r *bitReader) se(t *testing.T) int32 {
	t.Helper()
	k := int64(r.ue(t))
	if k%2 == 1 {
		return int32((k + 1) / 2)
	}
	return int32(-k / 2)
}

// unescape is an independent, obviously-correct reference for removing
// emulation prevention bytes (7.3.1).
func unescape(nal []byte) []byte {
	var out []byte
	zeros := 0
	for _, b := range nal {
		if zeros >= 2 && b == 3 {
			zeros = 0
			continue
		}
		out = append(out, b)
		if b == 0 {
			zeros++
		} else {
			zeros = 0
		}
	}
	return out
}

// escapeRef is an independent reference for adding emulation prevention.
func escapeRef(rbsp []byte) []byte {
	var out []byte
	for _, b := range rbsp {
		n := len(out)
		if n >= 2 && out[n-1] == 0 && out[n-2] == 0 && b <= 3 {
			out = append(out, 3)
		}
		out = append(out, b)
	}
	if len(out) > 0 && out[len(out)-1] == 0 {
		out = append(out, 3)
	}
	return out
}

// hasStartCodeEmulation reports whether a NAL payload contains a forbidden
// three-byte sequence 0x000000..0x000002 (0x000003 is the escape itself and
// is legal when followed by 0x00..0x03).
func hasStartCodeEmulation(nal []byte) bool {
	for i := 0; i+2 < len(nal); i++ {
		if nal[i] == 0 && nal[i+1] == 0 && nal[i+2] <= 2 {
			return true
		}
	}
	return false
}

// encodeBits runs f against a bitWriter without emulation prevention and
// returns the bytes, so tests see the raw RBSP bit layout.
func encodeBits(f func(w *bitWriter)) []byte {
	var buf bytes.Buffer
	s := newNALSink(&buf, flushSize)
	s.escape = false
	w := bitWriter{sink: s}
	f(&w)
	s.flush()
	return buf.Bytes()
}
