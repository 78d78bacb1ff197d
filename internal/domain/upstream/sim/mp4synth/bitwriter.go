package mp4synth

import "math/bits"

// bitWriter packs RBSP syntax elements MSB first (H.264 7.2) and hands each
// completed byte to a nalSink, which does emulation prevention.
type bitWriter struct {
	sink *nalSink
	acc  uint64 // pending bits, right-aligned; fewer than 8 between calls
	n    uint   // number of pending bits
}

// u writes the low nbits of v, nbits <= 32 (u(n) in the spec).
func (w *bitWriter) u(nbits uint, v uint32) {
	if nbits == 0 {
		return
	}
	w.acc = w.acc<<nbits | uint64(v)&(1<<nbits-1)
	w.n += nbits
	for w.n >= 8 {
		w.n -= 8
		w.sink.writeByte(byte(w.acc >> w.n))
	}
	w.acc &= 1<<w.n - 1
}

func (w *bitWriter) flag(b bool) {
	if b {
		w.u(1, 1)
	} else {
		w.u(1, 0)
	}
}

// ue writes unsigned Exp-Golomb (9.1): leadingZeros zeros, then v+1 in
// leadingZeros+1 bits. v must be < 2^32-1.
func (w *bitWriter) ue(v uint32) {
	x := uint64(v) + 1
	length := uint(bits.Len64(x))
	w.u(length-1, 0)
	w.u(length, uint32(x))
}

// se writes signed Exp-Golomb via the 9.1.1 mapping k>0 -> 2k-1, k<=0 -> -2k.
func (w *bitWriter) se(v int32) {
	if v > 0 {
		w.ue(uint32(2*int64(v) - 1))
	} else {
		w.ue(uint32(-2 * int64(v)))
	}
}

// alignZero writes zero bits up to the next byte boundary, as
// pcm_alignment_zero_bit and rbsp_alignment_zero_bit require.
func (w *bitWriter) alignZero() {
	if w.n != 0 {
		w.u(8-w.n, 0)
	}
}

// trailing writes rbsp_trailing_bits: a stop bit then alignment zeros.
func (w *bitWriter) trailing() {
	w.u(1, 1)
	w.alignZero()
}

// bytes writes whole bytes; the writer must be byte aligned.
func (w *bitWriter) bytes(p []byte) {
	if w.n != 0 {
		panic("mp4synth: bitWriter.bytes while not byte aligned")
	}
	w.sink.write(p)
}
