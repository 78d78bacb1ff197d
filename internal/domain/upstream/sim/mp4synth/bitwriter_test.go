package mp4synth

import (
	"fmt"
	"strings"
	"testing"
)

// bitString renders bytes as "0101..." truncated to n bits.
func bitString(b []byte, n int) string {
	var sb strings.Builder
	for _, x := range b {
		fmt.Fprintf(&sb, "%08b", x)
	}
	return sb.String()[:n]
}

func TestExpGolombBitPatterns(t *testing.T) {
	t.Parallel()
	// Table 9-2 of H.264 plus the signed mapping of Table 9-3.
	ue := []struct {
		v    uint32
		bits string
	}{
		{0, "1"},
		{1, "010"},
		{2, "011"},
		{3, "00100"},
		{4, "00101"},
		{6, "00111"},
		{7, "0001000"},
		{14, "0001111"},
		{15, "000010000"},
		{25, "000011010"},
		{30, "000011111"},
		{255, "00000000" + "100000000"},
		{65535, "0000000000000000" + "1" + "0000000000000000"},
		{1<<32 - 2, strings.Repeat("0", 31) + strings.Repeat("1", 32)},
	}
	for _, c := range ue {
		t.Run(fmt.Sprintf("ue(%d)", c.v), func(t *testing.T) {
			got := encodeBits(func(w *bitWriter) { w.ue(c.v); w.alignZero() })
			if s := bitString(got, len(c.bits)); s != c.bits {
				t.Errorf("ue(%d) = %s, want %s", c.v, s, c.bits)
			}
			if rest := bitString(got, len(got)*8)[len(c.bits):]; strings.Contains(rest, "1") {
				t.Errorf("ue(%d): alignment bits not zero: %s", c.v, rest)
			}
		})
	}
	se := []struct {
		v    int32
		bits string
	}{
		{0, "1"},
		{1, "010"},
		{-1, "011"},
		{2, "00100"},
		{-2, "00101"},
		{3, "00110"},
		{-3, "00111"},
		{-26, "00000110101"},
		{1<<31 - 1, strings.Repeat("0", 31) + strings.Repeat("1", 31) + "0"}, // code 2^32-3
	}
	for _, c := range se {
		t.Run(fmt.Sprintf("se(%d)", c.v), func(t *testing.T) {
			got := encodeBits(func(w *bitWriter) { w.se(c.v); w.alignZero() })
			if s := bitString(got, len(c.bits)); s != c.bits {
				t.Errorf("se(%d) = %s, want %s", c.v, s, c.bits)
			}
		})
	}
}

func TestBitWriterFixedWidthAndAlignment(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		f    func(w *bitWriter)
		want []byte
	}{
		{"u8", func(w *bitWriter) { w.u(8, 0x67) }, []byte{0x67}},
		{"u32", func(w *bitWriter) { w.u(32, 0xDEADBEEF) }, []byte{0xDE, 0xAD, 0xBE, 0xEF}},
		{"u masks high bits", func(w *bitWriter) { w.u(4, 0xFF); w.u(4, 0) }, []byte{0xF0}},
		{"u0 is a no-op", func(w *bitWriter) { w.u(0, 1); w.u(8, 0xAA) }, []byte{0xAA}},
		{"flags", func(w *bitWriter) {
			for _, b := range []bool{true, false, true, true, false, false, true, false} {
				w.flag(b)
			}
		}, []byte{0xB2}},
		{"straddles bytes", func(w *bitWriter) { w.u(3, 0b101); w.u(7, 0b1100110); w.u(6, 0b011111) }, []byte{0b10111001, 0b10011111}},
		{"trailing on boundary adds 0x80", func(w *bitWriter) { w.u(8, 1); w.trailing() }, []byte{0x01, 0x80}},
		{"trailing mid-byte", func(w *bitWriter) { w.u(3, 0b010); w.trailing() }, []byte{0b01010000}},
		{"alignZero on boundary is a no-op", func(w *bitWriter) { w.u(8, 0xFF); w.alignZero(); w.u(8, 1) }, []byte{0xFF, 0x01}},
		{"alignZero pads", func(w *bitWriter) { w.u(1, 1); w.alignZero(); w.bytes([]byte{7, 8}) }, []byte{0x80, 7, 8}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := encodeBits(c.f); string(got) != string(c.want) {
				t.Errorf("got % x, want % x", got, c.want)
			}
		})
	}
}

func TestBitWriterBytesUnalignedPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("bytes() while unaligned did not panic")
		}
	}()
	encodeBits(func(w *bitWriter) { w.u(1, 1); w.bytes([]byte{1}) })
}

// TestExpGolombRoundTrip writes long mixed sequences and reads them back
// with an independent reader, covering every code length.
func TestExpGolombRoundTrip(t *testing.T) {
	t.Parallel()
	var uvals []uint32
	for v := uint32(0); v < 5000; v++ {
		uvals = append(uvals, v)
	}
	for b := 1; b < 32; b++ {
		uvals = append(uvals, 1<<b-2, 1<<b-1, 1<<b)
	}
	uvals = append(uvals, 1<<32-2)
	var svals []int32
	for v := int32(-3000); v <= 3000; v++ {
		svals = append(svals, v)
	}
	svals = append(svals, 1<<31-1, -(1<<31 - 1))

	got := encodeBits(func(w *bitWriter) {
		for i, v := range uvals {
			w.ue(v)
			w.u(uint(i%5), uint32(i)) // interleave fixed-width fields
		}
		for _, v := range svals {
			w.se(v)
		}
		w.trailing()
	})
	r := bitReader{b: got}
	for i, want := range uvals {
		if v := r.ue(t); v != want {
			t.Fatalf("ue #%d: read %d, wrote %d", i, v, want)
		}
		if v, want := r.u(t, i%5), uint32(i)&(1<<(i%5)-1); v != want {
			t.Fatalf("u #%d: read %d, wrote %d", i, v, want)
		}
	}
	for i, want := range svals {
		if v := r.se(t); v != want {
			t.Fatalf("se #%d: read %d, wrote %d", i, v, want)
		}
	}
	if !r.flag(t) {
		t.Fatal("missing rbsp_stop_one_bit")
	}
	if r.pos%8 != 0 {
		for r.pos%8 != 0 {
			if r.flag(t) {
				t.Fatal("non-zero rbsp_alignment_zero_bit")
			}
		}
	}
	if r.pos != 8*len(got) {
		t.Fatalf("%d trailing bytes after the stop bit", len(got)-r.pos/8)
	}
}
