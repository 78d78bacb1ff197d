package mp4synth

import (
	"bytes"
	"fmt"
	"testing"
)

func TestEmulationPrevention(t *testing.T) {
	t.Parallel()
	cases := []struct {
		rbsp, nal []byte
	}{
		{[]byte{}, []byte{}},
		{[]byte{0x65, 0x88}, []byte{0x65, 0x88}},
		{[]byte{0, 0, 0}, []byte{0, 0, 3, 0, 3}}, // last byte 0 also gets a final 0x03
		{[]byte{0, 0, 0, 1}, []byte{0, 0, 3, 0, 1}},
		{[]byte{0, 0, 1}, []byte{0, 0, 3, 1}},
		{[]byte{0, 0, 2}, []byte{0, 0, 3, 2}},
		{[]byte{0, 0, 3}, []byte{0, 0, 3, 3}}, // a real 0x03 must be escaped too
		{[]byte{0, 0, 4}, []byte{0, 0, 4}},
		{[]byte{0, 0, 0xFF}, []byte{0, 0, 0xFF}},
		{[]byte{0, 1, 0, 1}, []byte{0, 1, 0, 1}},
		{[]byte{0, 0, 0, 0, 0, 1}, []byte{0, 0, 3, 0, 0, 3, 0, 1}},
		{[]byte{0, 0, 3, 0, 0, 3}, []byte{0, 0, 3, 3, 0, 0, 3, 3}},
		{[]byte{1, 0, 0, 1, 0, 0, 0, 1}, []byte{1, 0, 0, 3, 1, 0, 0, 3, 0, 1}},
		{[]byte{0x80, 0, 0}, []byte{0x80, 0, 0, 3}}, // RBSP ending in 0x00
		{[]byte{0x80, 0}, []byte{0x80, 0, 3}},
		{[]byte{0, 0, 0x80}, []byte{0, 0, 0x80}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("% x", c.rbsp), func(t *testing.T) {
			var buf bytes.Buffer
			s := newNALSink(&buf, flushSize)
			s.beginNAL()
			s.write(c.rbsp)
			s.endNAL()
			s.flush()
			if got := buf.Bytes(); !bytes.Equal(got, c.nal) {
				t.Errorf("escaped % x, want % x", got, c.nal)
			}
			if s.n != int64(len(c.nal)) {
				t.Errorf("n = %d, want %d", s.n, len(c.nal))
			}
			if ref := escapeRef(c.rbsp); !bytes.Equal(ref, c.nal) {
				t.Errorf("reference escaper disagrees with table: % x", ref)
			}
			if back := unescape(c.nal); !bytes.Equal(back, c.rbsp) && !(len(c.rbsp) > 0 && c.rbsp[len(c.rbsp)-1] == 0) {
				t.Errorf("unescape = % x, want % x", back, c.rbsp)
			}
			counter := newNALSink(nil, 0)
			counter.beginNAL()
			counter.write(c.rbsp)
			counter.endNAL()
			if counter.n != int64(len(c.nal)) {
				t.Errorf("count-only n = %d, want %d", counter.n, len(c.nal))
			}
		})
	}
}

// TestEmulationPreventionLong pushes data with many zero runs through
// several buffer flushes and compares with the reference escaper.
func TestEmulationPreventionLong(t *testing.T) {
	t.Parallel()
	rng := splitmix64(42)
	rbsp := make([]byte, 3*flushSize+123)
	for i := range rbsp {
		switch r := rng.next() % 8; {
		case r < 5:
			rbsp[i] = 0
		case r < 7:
			rbsp[i] = byte(r - 4) // 1..2
		default:
			rbsp[i] = byte(rng.next())
		}
	}
	rbsp[len(rbsp)-1] = 0x80
	var buf bytes.Buffer
	s := newNALSink(&buf, flushSize)
	s.beginNAL()
	s.putRaw([]byte{0, 0, 0, 9}) // a length prefix is never escaped
	s.write(rbsp)
	s.endNAL()
	s.flush()
	got := buf.Bytes()
	if !bytes.Equal(got[:4], []byte{0, 0, 0, 9}) {
		t.Fatalf("raw prefix altered: % x", got[:4])
	}
	want := escapeRef(rbsp)
	if !bytes.Equal(got[4:], want) {
		t.Fatalf("escaped output differs from reference (len %d vs %d)", len(got)-4, len(want))
	}
	if s.n != int64(len(want)) {
		t.Fatalf("n = %d, want %d (prefix must not count)", s.n, len(want))
	}
	if hasStartCodeEmulation(got[4:]) {
		t.Fatal("start code emulation left in output")
	}
	if !bytes.Equal(unescape(got[4:]), rbsp) {
		t.Fatal("unescape does not restore the RBSP")
	}
}

// TestSkipPCMMatchesRealBytes checks the sizing shortcut: for bytes in the
// sample range, skipping must count exactly what writing produces, whatever
// zero run precedes them.
func TestSkipPCMMatchesRealBytes(t *testing.T) {
	t.Parallel()
	pcm := bytes.Repeat([]byte{minSample, maxLuma, 128}, 128)
	for _, prefix := range [][]byte{{}, {0}, {0, 0}, {0, 0, 0}, {1, 0, 0}} {
		var buf bytes.Buffer
		real := newNALSink(&buf, flushSize)
		count := newNALSink(nil, 0)
		for _, s := range []*nalSink{real, count} {
			s.beginNAL()
			s.write(prefix)
		}
		real.write(pcm)
		count.skipPCM(len(pcm))
		for _, s := range []*nalSink{real, count} {
			s.write([]byte{0, 0, 1}) // state after the PCM must match too
			s.endNAL()
		}
		if real.n != count.n {
			t.Errorf("prefix % x: written %d bytes, counted %d", prefix, real.n, count.n)
		}
	}
}

func TestNALSinkWriteErrorIsSticky(t *testing.T) {
	t.Parallel()
	s := newNALSink(failWriter{}, flushSize)
	s.write(make([]byte, 2*flushSize))
	s.flush()
	if s.err == nil {
		t.Fatal("write error was lost")
	}
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, fmt.Errorf("disk full") }
