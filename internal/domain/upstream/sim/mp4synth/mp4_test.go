package mp4synth

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// TestMoovBeforeMdat checks the fast-start layout and walks the sample
// tables against the mdat contents.
func TestMoovBeforeMdat(t *testing.T) {
	t.Parallel()
	p := Params{Width: 200, Height: 120, Seconds: 3, FPS: 25, Seed: 3}
	var buf bytes.Buffer
	if _, err := Write(&buf, p); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	top := parseBoxes(t, b, 0, int64(len(b)))
	var types []string
	for _, bx := range top {
		types = append(types, bx.typ)
	}
	if !slices.Equal(types, []string{"ftyp", "moov", "mdat"}) {
		t.Fatalf("top-level boxes %v, want [ftyp moov mdat]", types)
	}
	moov, mdat := top[1], top[2]
	frames := p.Seconds * p.FPS

	ftyp := payload(b, top[0])
	if string(ftyp[:4]) != "isom" || !bytes.Contains(ftyp[8:], []byte("avc1")) {
		t.Errorf("ftyp brands %q", ftyp)
	}

	stbl := child(t, b, moov, "trak", "mdia", "minf", "stbl")
	u32 := func(p []byte, i int) uint32 { return binary.BigEndian.Uint32(p[4*i:]) }

	stts := payload(b, child(t, b, stbl, "stts"))
	if u32(stts, 1) != 1 || u32(stts, 2) != uint32(frames) || u32(stts, 3) != sampleDelta {
		t.Errorf("stts = % x", stts)
	}
	mdhd := payload(b, child(t, b, moov, "trak", "mdia", "mdhd"))
	if ts, dur := u32(mdhd, 3), u32(mdhd, 4); ts != uint32(p.FPS*sampleDelta) || dur != uint32(frames*sampleDelta) {
		t.Errorf("mdhd timescale %d duration %d", ts, dur)
	}
	stss := payload(b, child(t, b, stbl, "stss"))
	if u32(stss, 1) != 1 || u32(stss, 2) != 1 {
		t.Errorf("stss = % x, want only sample 1", stss)
	}
	stsc := payload(b, child(t, b, stbl, "stsc"))
	if u32(stsc, 1) != 1 || u32(stsc, 3) != uint32(p.FPS) {
		t.Errorf("stsc = % x", stsc)
	}
	stsz := payload(b, child(t, b, stbl, "stsz"))
	if u32(stsz, 1) != 0 || u32(stsz, 2) != uint32(frames) {
		t.Fatalf("stsz header % x", stsz[:12])
	}
	stco := payload(b, child(t, b, stbl, "stco"))
	if u32(stco, 1) != uint32(p.Seconds) {
		t.Fatalf("stco has %d chunks, want %d", u32(stco, 1), p.Seconds)
	}
	avcC := payload(b, child(t, b, stbl, "stsd", "avc1", "avcC"))
	if avcC[0] != 1 || avcC[1] != 66 || avcC[2] != 0xC0 || avcC[4] != 0xFF || avcC[5] != 0xE1 {
		t.Errorf("avcC header % x", avcC[:6])
	}

	// Walk mdat sample by sample using stsz and stco.
	off := mdat.start + mdat.header
	for n := range frames {
		if n%p.FPS == 0 {
			if got := int64(u32(stco, 2+n/p.FPS)); got != off {
				t.Fatalf("chunk %d offset %d, want %d", n/p.FPS, got, off)
			}
		}
		size := int64(u32(stsz, 3+n))
		nalLen := int64(binary.BigEndian.Uint32(b[off:]))
		if nalLen+4 != size {
			t.Fatalf("sample %d: NAL length %d, stsz %d", n, nalLen, size)
		}
		nal := b[off+4 : off+size]
		wantType := byte(1)
		if n == 0 {
			wantType = 5
		}
		if nal[0]&0x1F != wantType || nal[0]&0x60 == 0 {
			t.Fatalf("sample %d: NAL header %#x, want type %d with nal_ref_idc > 0", n, nal[0], wantType)
		}
		if hasStartCodeEmulation(nal) {
			t.Fatalf("sample %d: start code emulation", n)
		}
		off += size
	}
	if off != int64(len(b)) {
		t.Fatalf("samples end at %d, file is %d bytes", off, len(b))
	}
}

// TestLayoutWideFields fakes multi-gigabyte sample tables to exercise the
// 64-bit paths that real test videos are too small to reach.
func TestLayoutWideFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		sizes     []uint32
		wantCo64  bool
		wantLarge bool
	}{
		{"small", []uint32{1000, 2000, 3000}, false, false},
		{"mdat just under 4GiB", []uint32{1 << 30, 1 << 30, 1<<30 + 1<<29}, false, false},
		{"last chunk beyond 4GiB", []uint32{2 << 30, 2<<30 - 1, 100}, true, true},
		{"mdat over 4GiB, offsets fit", []uint32{1 << 30, 1 << 30, 2 << 30}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := &mp4Track{width: 64, height: 64, fps: 1, seconds: len(c.sizes), sizes: c.sizes,
				sps: buildSPS(newGeometry(64, 64), 1, 30, 4), pps: buildPPS(), profile: 66, compat: 0xC0, level: 30}
			l := buildLayout(tr)
			h := l.header
			// The header ends with the mdat box header (8 or 16 bytes).
			ftypEnd := int64(binary.BigEndian.Uint32(h))
			moovEnd := ftypEnd + int64(binary.BigEndian.Uint32(h[ftypEnd:]))
			top := parseBoxes(t, h, 0, moovEnd)
			if len(top) != 2 || top[0].typ != "ftyp" || top[1].typ != "moov" {
				t.Fatalf("header boxes %+v", top)
			}
			mdatHdr := h[top[1].start+top[1].size:]
			var payloadTotal int64
			for _, s := range c.sizes {
				payloadTotal += int64(s)
			}
			large := binary.BigEndian.Uint32(mdatHdr) == 1
			if large != c.wantLarge || string(mdatHdr[4:8]) != "mdat" {
				t.Fatalf("mdat header % x, want largesize=%v", mdatHdr, c.wantLarge)
			}
			if large {
				if got := int64(binary.BigEndian.Uint64(mdatHdr[8:])); got != payloadTotal+16 || len(mdatHdr) != 16 {
					t.Errorf("largesize %d, want %d", got, payloadTotal+16)
				}
			} else if got := int64(binary.BigEndian.Uint32(mdatHdr)); got != payloadTotal+8 || len(mdatHdr) != 8 {
				t.Errorf("mdat size %d, want %d", got, payloadTotal+8)
			}
			if l.size() != int64(len(h))+payloadTotal {
				t.Errorf("size() = %d", l.size())
			}
			stbl := child(t, h, top[1], "trak", "mdia", "minf", "stbl")
			typ := "stco"
			if c.wantCo64 {
				typ = "co64"
			}
			offs := payload(h, child(t, h, stbl, typ))
			off := uint64(len(h))
			for i, s := range c.sizes {
				var got uint64
				if c.wantCo64 {
					got = binary.BigEndian.Uint64(offs[8+8*i:])
				} else {
					got = uint64(binary.BigEndian.Uint32(offs[8+4*i:]))
				}
				if got != off {
					t.Errorf("chunk %d offset %d, want %d", i, got, off)
				}
				off += uint64(s)
			}
			if !c.wantCo64 && off-uint64(c.sizes[len(c.sizes)-1]) > math.MaxUint32 {
				t.Error("stco used with an offset beyond 32 bits")
			}
		})
	}
}
