package mp4synth

import "bytes"

// Fixed stream properties shared by the SPS, the avcC box and the slices.
const (
	profileBaseline = 66
	// constraintFlags sets constraint_set0 and constraint_set1: the stream
	// obeys Baseline and Main, i.e. it is Constrained Baseline.
	constraintFlags = 0xC0

	nalHeaderSPS = 0x67 // nal_ref_idc 3, nal_unit_type 7
	nalHeaderPPS = 0x68 // nal_ref_idc 3, nal_unit_type 8
)

// geometry is the picture size in luma samples and in macroblocks.
type geometry struct {
	width, height int // visible size
	mbw, mbh      int // coded size in macroblocks, rounded up
}

func newGeometry(width, height int) geometry {
	return geometry{width: width, height: height, mbw: (width + 15) / 16, mbh: (height + 15) / 16}
}

func (g geometry) mbs() int { return g.mbw * g.mbh }

// cropRight and cropBottom are in units of 2 luma samples (CropUnitX/Y for
// 4:2:0 with frame_mbs_only_flag, 7.4.2.1.1), so the decoded picture is
// exactly width x height.
func (g geometry) cropRight() int  { return (g.mbw*16 - g.width) / 2 }
func (g geometry) cropBottom() int { return (g.mbh*16 - g.height) / 2 }

// log2MaxFrameNum picks the smallest field width in which frame_num never
// wraps, so decoders need no wrap handling at all.
func log2MaxFrameNum(frames int) uint {
	n := uint(4)
	for n < 16 && 1<<n < frames {
		n++
	}
	return n
}

// buildSPS returns the seq_parameter_set NAL unit (7.3.2.1.1), escaped and
// with its header byte, as stored in avcC.
func buildSPS(g geometry, fps int, levelIDC uint8, frameNumBits uint) []byte {
	var out bytes.Buffer
	s := newNALSink(&out, 64) // parameter sets are tiny
	w := bitWriter{sink: s}
	s.beginNAL()
	w.u(8, nalHeaderSPS)
	w.u(8, profileBaseline)
	w.u(8, constraintFlags)
	w.u(8, uint32(levelIDC))
	w.ue(0) // seq_parameter_set_id
	// Baseline has no chroma_format_idc: 4:2:0, 8-bit are implied.
	w.ue(uint32(frameNumBits - 4)) // log2_max_frame_num_minus4
	// POC type 2: output order is decoding order, no POC syntax in slices.
	w.ue(2)
	w.ue(1)       // max_num_ref_frames: P frames reference the previous frame
	w.flag(false) // gaps_in_frame_num_value_allowed_flag
	w.ue(uint32(g.mbw - 1))
	w.ue(uint32(g.mbh - 1)) // pic_height_in_map_units_minus1
	w.flag(true)            // frame_mbs_only_flag
	w.flag(true)            // direct_8x8_inference_flag
	cropped := g.cropRight() != 0 || g.cropBottom() != 0
	w.flag(cropped)
	if cropped {
		w.ue(0)
		w.ue(uint32(g.cropRight()))
		w.ue(0)
		w.ue(uint32(g.cropBottom()))
	}
	w.flag(true) // vui_parameters_present_flag
	writeVUI(&w, fps)
	w.trailing()
	s.endNAL()
	s.flush()
	return out.Bytes()
}

// writeVUI (E.1.1) declares square pixels, BT.709 limited range (the
// colours picture.go converts with), the frame rate, and — most important
// for players — that no frame is reordered, so each frame is output as soon
// as it is decoded.
func writeVUI(w *bitWriter, fps int) {
	w.flag(true)  // aspect_ratio_info_present_flag
	w.u(8, 1)     // aspect_ratio_idc: 1:1
	w.flag(false) // overscan_info_present_flag
	w.flag(true)  // video_signal_type_present_flag
	w.u(3, 5)     // video_format: unspecified
	w.flag(false) // video_full_range_flag
	w.flag(true)  // colour_description_present_flag
	w.u(8, 1)     // colour_primaries: BT.709
	w.u(8, 1)     // transfer_characteristics: BT.709
	w.u(8, 1)     // matrix_coefficients: BT.709
	w.flag(false) // chroma_loc_info_present_flag
	w.flag(true)  // timing_info_present_flag
	w.u(32, 1)    // num_units_in_tick
	// A frame lasts two ticks (one per field), hence 2*fps.
	w.u(32, uint32(2*fps))
	w.flag(true)  // fixed_frame_rate_flag
	w.flag(false) // nal_hrd_parameters_present_flag
	w.flag(false) // vcl_hrd_parameters_present_flag
	w.flag(false) // pic_struct_present_flag
	w.flag(true)  // bitstream_restriction_flag
	w.flag(true)  // motion_vectors_over_pic_boundaries_flag
	w.ue(0)       // max_bytes_per_pic_denom: no limit (I_PCM pictures are big)
	w.ue(0)       // max_bits_per_mb_denom: no limit (I_PCM is 3072+ bits)
	w.ue(15)      // log2_max_mv_length_horizontal (the inferred default)
	w.ue(15)      // log2_max_mv_length_vertical
	w.ue(0)       // max_num_reorder_frames
	w.ue(1)       // max_dec_frame_buffering
}
