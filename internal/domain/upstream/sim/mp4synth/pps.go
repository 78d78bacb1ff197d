package mp4synth

import "bytes"

// buildPPS returns the pic_parameter_set NAL unit (7.3.2.2). The one
// non-default choice is deblocking_filter_control_present_flag, which lets
// every slice switch the loop filter off: with I_PCM and P_Skip only, the
// decoded picture is then bit-exact with what picture.go drew, and skipped
// macroblocks are exact copies of the previous frame.
func buildPPS() []byte {
	var out bytes.Buffer
	s := newNALSink(&out, 64) // parameter sets are tiny
	w := bitWriter{sink: s}
	s.beginNAL()
	w.u(8, nalHeaderPPS)
	w.ue(0)       // pic_parameter_set_id
	w.ue(0)       // seq_parameter_set_id
	w.flag(false) // entropy_coding_mode_flag: CAVLC
	w.flag(false) // bottom_field_pic_order_in_frame_present_flag
	w.ue(0)       // num_slice_groups_minus1
	w.ue(0)       // num_ref_idx_l0_default_active_minus1
	w.ue(0)       // num_ref_idx_l1_default_active_minus1
	w.flag(false) // weighted_pred_flag
	w.u(2, 0)     // weighted_bipred_idc
	w.se(0)       // pic_init_qp_minus26 (unused by I_PCM and P_Skip)
	w.se(0)       // pic_init_qs_minus26
	w.se(0)       // chroma_qp_index_offset
	w.flag(true)  // deblocking_filter_control_present_flag
	w.flag(false) // constrained_intra_pred_flag
	w.flag(false) // redundant_pic_cnt_present_flag
	w.trailing()
	s.endNAL()
	s.flush()
	return out.Bytes()
}
