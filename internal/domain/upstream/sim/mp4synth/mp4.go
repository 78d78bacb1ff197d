package mp4synth

import (
	"bytes"
	"fmt"
	"math"

	"github.com/Eyevinn/mp4ff/avc"
	"github.com/Eyevinn/mp4ff/mp4"
)

// mp4Track is everything the header boxes need to know about the video.
type mp4Track struct {
	width, height   int
	fps, seconds    int
	sizes           []uint32 // sample sizes, including the 4-byte NAL length
	sps, pps        []byte
	profile, compat uint8
	level           uint8
}

// Timing: the media timescale is fps*1000 so each sample lasts exactly 1000
// ticks and the track lasts exactly seconds*fps*1000 ticks, whatever fps is.
const (
	movieTimescale = 1000
	sampleDelta    = 1000
)

// mp4Layout is the byte layout of the file: header (ftyp, moov and the mdat
// box header) followed by the mdat payload.
type mp4Layout struct {
	header  []byte
	payload int64 // sum of sample sizes
}

func (l mp4Layout) size() int64 { return int64(len(l.header)) + l.payload }

// buildLayout chooses 32- or 64-bit fields where the file needs them: mdat
// uses a largesize header above 4 GiB, and chunk offsets switch from stco to
// co64 when the last chunk starts beyond 4 GiB. Chunks hold one second of
// samples each, so every offset is known from the sample sizes alone.
//
// The boxes are built and serialized by mp4ff. Only the mdat payload is not
// (mp4ff's MdatBox holds its data in memory); Write streams it after the
// header returned here.
func buildLayout(t *mp4Track) mp4Layout {
	var payload int64
	for _, s := range t.sizes {
		payload += int64(s)
	}
	mdatHeader := uint64(8)
	if payload+8 > math.MaxUint32 {
		mdatHeader = 16
	}
	ftyp := mp4.NewFtyp("isom", 0x200, []string{"isom", "iso2", "avc1", "mp41"})
	for _, wide := range []bool{false, true} {
		// Offsets depend on the moov size, which depends on the offset
		// width but not on the offset values; a 32-bit attempt that
		// overflows is redone with co64 (the moov only grows, so the
		// offsets still need 64 bits).
		moov, setOffsets := buildMoov(t, wide)
		dataStart := ftyp.Size() + moov.Size() + mdatHeader
		offsets := chunkOffsets(t, dataStart)
		if !wide && offsets[len(offsets)-1] > math.MaxUint32 {
			continue
		}
		setOffsets(offsets)

		h := bytes.NewBuffer(make([]byte, 0, dataStart))
		// Errors here are bugs (writes to a bytes.Buffer do not fail and
		// no box comes near 4 GiB); there is no caller that could handle
		// them, so they panic like other broken invariants.
		must(ftyp.Encode(h))
		must(moov.Encode(h))
		must(mp4.EncodeHeaderWithSize("mdat", uint64(payload)+mdatHeader, mdatHeader == 16, h))
		if uint64(h.Len()) != dataStart {
			// The chunk offsets were computed from the Size methods.
			panic(fmt.Sprintf("mp4synth: header encoded to %d bytes, sized as %d", h.Len(), dataStart))
		}
		return mp4Layout{header: h.Bytes(), payload: payload}
	}
	panic("unreachable")
}

func must(err error) {
	if err != nil {
		panic(fmt.Sprintf("mp4synth: encode header boxes: %v", err))
	}
}

// chunkOffsets returns the file offset of each one-second chunk when the
// mdat payload starts at dataStart.
func chunkOffsets(t *mp4Track, dataStart uint64) []uint64 {
	offsets := make([]uint64, t.seconds)
	off := dataStart
	for c := range offsets {
		offsets[c] = off
		for _, s := range t.sizes[c*t.fps : (c+1)*t.fps] {
			off += uint64(s)
		}
	}
	return offsets
}

// buildMoov builds the moov box for one progressive (non-fragmented) video
// track. Its chunk offset table (co64 if wideOffsets, else stco) has one
// zero entry per chunk until setOffsets fills it in; the size of the box
// does not depend on the values.
func buildMoov(t *mp4Track, wideOffsets bool) (moov *mp4.MoovBox, setOffsets func([]uint64)) {
	frames := uint32(len(t.sizes))
	movieDur := uint64(t.seconds * movieTimescale)

	// Times stay zero (1904-01-01) so identical Params give identical bytes.
	mvhd := mp4.CreateMvhd() // rate 1.0, volume 1.0, next_track_ID 2
	mvhd.Timescale = movieTimescale
	mvhd.Duration = movieDur

	tkhd := mp4.CreateTkhd() // track_ID 1
	tkhd.Flags = 0x3         // enabled, in movie
	tkhd.Duration = movieDur
	tkhd.Width = mp4.Fixed32(uint32(t.width) << 16) // 16.16 fixed point
	tkhd.Height = mp4.Fixed32(uint32(t.height) << 16)

	mdhd := &mp4.MdhdBox{
		Timescale: uint32(t.fps * sampleDelta),
		Duration:  uint64(frames) * sampleDelta,
	}
	mdhd.SetLanguage("und")

	hdlr, err := mp4.CreateHdlr("vide")
	must(err)
	hdlr.Name = "VideoHandler"

	dinf := &mp4.DinfBox{}
	dinf.AddChild(mp4.CreateDref()) // one self-contained url entry

	stbl := mp4.NewStblBox()
	stbl.AddChild(buildStsd(t))
	stbl.AddChild(&mp4.SttsBox{SampleCount: []uint32{frames}, SampleTimeDelta: []uint32{sampleDelta}})
	// Only the IDR is a sync sample; all other frames are P frames.
	stbl.AddChild(&mp4.StssBox{SampleNumber: []uint32{1}})
	stsc := &mp4.StscBox{}
	// samples_per_chunk: one second; cannot fail, the first entry is chunk 1.
	must(stsc.AddEntry(1, uint32(t.fps), 1))
	stbl.AddChild(stsc)
	// Sizes differ, so sample_size is 0 and the table follows. mp4ff
	// encodes t.sizes in place, without a copy.
	stbl.AddChild(&mp4.StszBox{SampleNumber: frames, SampleSize: t.sizes})
	if wideOffsets {
		co64 := &mp4.Co64Box{ChunkOffset: make([]uint64, t.seconds)}
		stbl.AddChild(co64)
		setOffsets = func(o []uint64) { copy(co64.ChunkOffset, o) }
	} else {
		stco := &mp4.StcoBox{ChunkOffset: make([]uint32, t.seconds)}
		stbl.AddChild(stco)
		setOffsets = func(o []uint64) {
			for i, v := range o {
				stco.ChunkOffset[i] = uint32(v) // buildLayout checked the range
			}
		}
	}

	minf := mp4.NewMinfBox()
	minf.AddChild(mp4.CreateVmhd())
	minf.AddChild(dinf)
	minf.AddChild(stbl)

	mdia := mp4.NewMdiaBox()
	mdia.AddChild(mdhd)
	mdia.AddChild(hdlr)
	mdia.AddChild(minf)

	trak := mp4.NewTrakBox()
	trak.AddChild(tkhd)
	trak.AddChild(mdia)

	moov = mp4.NewMoovBox()
	moov.AddChild(mvhd)
	moov.AddChild(trak)
	return moov, setOffsets
}

// buildStsd builds the avc1 sample entry (ISO/IEC 14496-12 VisualSampleEntry)
// with its avcC decoder configuration (ISO/IEC 14496-15 5.3.3).
func buildStsd(t *mp4Track) *mp4.StsdBox {
	// The record is filled from the values the SPS was written with rather
	// than by mp4.CreateAvcC, which would re-parse the SPS to find them.
	// Profile 66 has no chroma/bit-depth trailer; mp4ff writes 4-byte NAL
	// lengths (lengthSizeMinusOne = 3), matching nalLengthSize.
	avcC := &mp4.AvcCBox{DecConfRec: avc.DecConfRec{
		AVCProfileIndication: t.profile,
		ProfileCompatibility: t.compat,
		AVCLevelIndication:   t.level,
		SPSnalus:             [][]byte{t.sps},
		PPSnalus:             [][]byte{t.pps},
		ChromaFormat:         1, // 4:2:0
	}}
	avc1 := mp4.CreateVisualSampleEntryBox("avc1", uint16(t.width), uint16(t.height), avcC)
	avc1.CompressorName = "mp4synth H.264"
	// Square pixels, stated for players that ignore the VUI.
	avc1.AddChild(&mp4.PaspBox{HSpacing: 1, VSpacing: 1})

	stsd := mp4.NewStsdBox()
	stsd.AddChild(avc1)
	return stsd
}
