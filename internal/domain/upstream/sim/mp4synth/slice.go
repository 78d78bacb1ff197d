package mp4synth

// Slice NAL headers and mb_type values (7.4.1, Tables 7-11 and 7-13).
const (
	nalHeaderIDR = 0x65 // nal_ref_idc 3, nal_unit_type 5 (IDR slice)
	nalHeaderP   = 0x41 // nal_ref_idc 2, nal_unit_type 1 (non-IDR slice)

	// Values 5..9 are P..SI with the promise that every slice of the
	// picture has that type (we have one slice per picture anyway).
	sliceTypeP = 5
	sliceTypeI = 7

	mbTypeIPCMInI = 25
	mbTypeIPCMInP = 5 + 25 // P slices number intra types after the 5 P types
)

// frameEncoder writes one slice NAL unit per frame: frame 0 is an IDR of
// I_PCM macroblocks; later frames are P slices that code changed
// macroblocks as I_PCM and skip the rest. P_Skip copies the co-located
// macroblock of the previous frame because every motion vector in the
// stream is zero: intra and skipped neighbours both predict a zero vector
// (8.4.1.1, 8.4.1.3), so the prediction stays zero by induction.
type frameEncoder struct {
	sc           *scene
	frameNumBits uint
	sink         *nalSink
	bw           bitWriter
	count        bool // size only: PCM bytes are accounted, not rendered
	mb           [mbBytes]byte
	prev, cur    frameState
}

func newFrameEncoder(sc *scene, frameNumBits uint, sink *nalSink) *frameEncoder {
	e := &frameEncoder{sc: sc, frameNumBits: frameNumBits, sink: sink, count: sink.w == nil}
	e.bw.sink = sink
	return e
}

// encode writes frame n as one NAL unit (without length prefix) and
// returns its size in bytes. Frames must be encoded in order 0, 1, 2...
// because each P frame is coded against the previous one.
func (e *frameEncoder) encode(n int) int64 {
	e.prev = e.cur
	e.cur = e.sc.state(n)
	e.sink.beginNAL()
	if n == 0 {
		e.idr()
	} else {
		e.p(n)
	}
	e.bw.trailing() // rbsp_slice_trailing_bits (CAVLC: no cabac_zero_words)
	e.sink.endNAL()
	return e.sink.n
}

func (e *frameEncoder) idr() {
	w := &e.bw
	w.u(8, nalHeaderIDR)
	w.ue(0) // first_mb_in_slice: one slice per picture
	w.ue(sliceTypeI)
	w.ue(0)                // pic_parameter_set_id
	w.u(e.frameNumBits, 0) // frame_num
	w.ue(0)                // idr_pic_id
	w.flag(false)          // no_output_of_prior_pics_flag
	w.flag(false)          // long_term_reference_flag
	e.sliceHeaderTail()
	g := e.sc.geo
	for mby := range g.mbh {
		for mbx := range g.mbw {
			w.ue(mbTypeIPCMInI)
			e.pcm(mbx, mby)
		}
	}
}

func (e *frameEncoder) p(n int) {
	w := &e.bw
	w.u(8, nalHeaderP)
	w.ue(0) // first_mb_in_slice
	w.ue(sliceTypeP)
	w.ue(0) // pic_parameter_set_id
	// Every picture is a reference picture, so frame_num counts frames;
	// log2MaxFrameNum is wide enough that it never wraps.
	w.u(e.frameNumBits, uint32(n))
	w.flag(false) // num_ref_idx_active_override_flag: 1 reference (PPS)
	w.flag(false) // ref_pic_list_modification_flag_l0
	w.flag(false) // adaptive_ref_pic_marking_mode_flag: sliding window
	e.sliceHeaderTail()
	g := e.sc.geo
	skipped := uint32(0)
	for mby := range g.mbh {
		for mbx := range g.mbw {
			if !e.sc.changed(&e.prev, &e.cur, mbx, mby) {
				skipped++
				continue
			}
			w.ue(skipped) // mb_skip_run, written before every coded macroblock
			skipped = 0
			w.ue(mbTypeIPCMInP)
			e.pcm(mbx, mby)
		}
	}
	// A final run ends the slice; after a coded macroblock the trailing
	// bits alone tell the decoder there is no more data (more_rbsp_data).
	if skipped > 0 {
		w.ue(skipped)
	}
}

// sliceHeaderTail writes the fields shared by both slice types, after
// dec_ref_pic_marking (7.3.3).
func (e *frameEncoder) sliceHeaderTail() {
	e.bw.se(0) // slice_qp_delta: irrelevant, no residual is ever coded
	// disable_deblocking_filter_idc = 1: keep decoded pictures bit-exact,
	// see buildPPS.
	e.bw.ue(1)
}

// pcm writes pcm_alignment_zero_bits and the samples of one I_PCM
// macroblock.
func (e *frameEncoder) pcm(mbx, mby int) {
	e.bw.alignZero()
	if e.count {
		e.sink.skipPCM(mbBytes)
		return
	}
	e.sc.fillMB(&e.cur, mbx, mby, &e.mb)
	e.bw.bytes(e.mb[:])
}
