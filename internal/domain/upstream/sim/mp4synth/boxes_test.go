package mp4synth

import (
	"encoding/binary"
	"testing"
)

// box is a parsed ISO BMFF box header.
type box struct {
	typ           string
	start, header int64 // offset of the box and size of its header
	size          int64
}

// parseBoxes lists the boxes in b[start:end], handling 64-bit largesize.
func parseBoxes(t *testing.T, b []byte, start, end int64) []box {
	t.Helper()
	var out []box
	for off := start; off < end; {
		if end-off < 8 {
			t.Fatalf("truncated box header at %d", off)
		}
		bx := box{typ: string(b[off+4 : off+8]), start: off, header: 8, size: int64(binary.BigEndian.Uint32(b[off:]))}
		if bx.size == 1 {
			bx.header = 16
			bx.size = int64(binary.BigEndian.Uint64(b[off+8:]))
		}
		if bx.size < bx.header || off+bx.size > end {
			t.Fatalf("box %q at %d has bad size %d (end %d)", bx.typ, off, bx.size, end)
		}
		out = append(out, bx)
		off += bx.size
	}
	return out
}

// child finds the path of box types below parent (full boxes' version and
// flags are part of the payload and skipped by the caller).
func child(t *testing.T, b []byte, parent box, path ...string) box {
	t.Helper()
	cur := parent
	for _, typ := range path {
		found := false
		for _, c := range parseBoxes(t, b, cur.start+cur.header+skipFor(cur.typ), cur.start+cur.size) {
			if c.typ == typ {
				cur, found = c, true
				break
			}
		}
		if !found {
			t.Fatalf("no %q inside %q", typ, cur.typ)
		}
	}
	return cur
}

// skipFor is the non-box prefix of container payloads we descend into.
func skipFor(typ string) int64 {
	switch typ {
	case "stsd":
		return 8 // version/flags + entry_count
	case "avc1":
		return 78 // VisualSampleEntry fields
	}
	return 0
}

func payload(b []byte, bx box) []byte { return b[bx.start+bx.header : bx.start+bx.size] }
