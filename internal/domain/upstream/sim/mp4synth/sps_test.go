package mp4synth

import (
	"bytes"
	"fmt"
	"testing"
)

func TestLog2MaxFrameNum(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		frames int
		want   uint
	}{{1, 4}, {16, 4}, {17, 5}, {96, 7}, {360, 9}, {3600, 12}, {1 << 16, 16}, {1 << 20, 16}} {
		if got := log2MaxFrameNum(c.frames); got != c.want {
			t.Errorf("log2MaxFrameNum(%d) = %d, want %d", c.frames, got, c.want)
		}
	}
}

// TestSPSFields parses the SPS back and checks every field, above all the
// macroblock size and cropping that make the decoded size exact.
func TestSPSFields(t *testing.T) {
	t.Parallel()
	cases := []struct {
		w, h, fps         int
		mbw, mbh          uint32
		cropRight, cropBt uint32
	}{
		{1920, 1080, 24, 120, 68, 0, 4},
		{1280, 720, 24, 80, 45, 0, 0},
		{2206, 946, 24, 138, 60, 1, 7},
		{1470, 630, 30, 92, 40, 1, 5},
		{834, 1112, 24, 53, 70, 7, 4},
		{16, 16, 60, 1, 1, 0, 0},
		{18, 4096, 1, 2, 256, 7, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			nal := buildSPS(newGeometry(c.w, c.h), c.fps, 42, 9)
			if hasStartCodeEmulation(nal) {
				t.Fatalf("SPS contains start code emulation: % x", nal)
			}
			r := bitReader{b: unescape(nal)}
			expect := func(name string, got, want uint32) {
				t.Helper()
				if got != want {
					t.Errorf("%s = %d, want %d", name, got, want)
				}
			}
			expect("nal header", r.u(t, 8), 0x67)
			expect("profile_idc", r.u(t, 8), 66)
			expect("constraint flags", r.u(t, 8), 0xC0)
			expect("level_idc", r.u(t, 8), 42)
			expect("sps id", r.ue(t), 0)
			expect("log2_max_frame_num_minus4", r.ue(t), 5)
			expect("pic_order_cnt_type", r.ue(t), 2)
			expect("max_num_ref_frames", r.ue(t), 1)
			expect("gaps", r.u(t, 1), 0)
			expect("pic_width_in_mbs_minus1", r.ue(t), c.mbw-1)
			expect("pic_height_in_map_units_minus1", r.ue(t), c.mbh-1)
			expect("frame_mbs_only_flag", r.u(t, 1), 1)
			expect("direct_8x8_inference_flag", r.u(t, 1), 1)
			cropped := r.flag(t)
			if cropped != (c.cropRight != 0 || c.cropBt != 0) {
				t.Fatalf("frame_cropping_flag = %v", cropped)
			}
			if cropped {
				expect("crop left", r.ue(t), 0)
				expect("crop right", r.ue(t), c.cropRight)
				expect("crop top", r.ue(t), 0)
				expect("crop bottom", r.ue(t), c.cropBt)
			}
			// Decoded size = coded size minus 2*crop (CropUnitX/Y = 2).
			if w := 16*c.mbw - 2*c.cropRight; w != uint32(c.w) {
				t.Errorf("decoded width %d, want %d", w, c.w)
			}
			if h := 16*c.mbh - 2*c.cropBt; h != uint32(c.h) {
				t.Errorf("decoded height %d, want %d", h, c.h)
			}
			expect("vui_parameters_present_flag", r.u(t, 1), 1)
			expect("aspect_ratio_info_present_flag", r.u(t, 1), 1)
			expect("aspect_ratio_idc", r.u(t, 8), 1)
			expect("overscan_info_present_flag", r.u(t, 1), 0)
			expect("video_signal_type_present_flag", r.u(t, 1), 1)
			expect("video_format", r.u(t, 3), 5)
			expect("video_full_range_flag", r.u(t, 1), 0)
			expect("colour_description_present_flag", r.u(t, 1), 1)
			expect("colour_primaries", r.u(t, 8), 1)
			expect("transfer_characteristics", r.u(t, 8), 1)
			expect("matrix_coefficients", r.u(t, 8), 1)
			expect("chroma_loc_info_present_flag", r.u(t, 1), 0)
			expect("timing_info_present_flag", r.u(t, 1), 1)
			expect("num_units_in_tick", r.u(t, 32), 1)
			expect("time_scale", r.u(t, 32), uint32(2*c.fps))
			expect("fixed_frame_rate_flag", r.u(t, 1), 1)
			expect("nal_hrd", r.u(t, 1), 0)
			expect("vcl_hrd", r.u(t, 1), 0)
			expect("pic_struct_present_flag", r.u(t, 1), 0)
			expect("bitstream_restriction_flag", r.u(t, 1), 1)
			expect("motion_vectors_over_pic_boundaries_flag", r.u(t, 1), 1)
			expect("max_bytes_per_pic_denom", r.ue(t), 0)
			expect("max_bits_per_mb_denom", r.ue(t), 0)
			expect("log2_max_mv_length_horizontal", r.ue(t), 15)
			expect("log2_max_mv_length_vertical", r.ue(t), 15)
			expect("max_num_reorder_frames", r.ue(t), 0)
			expect("max_dec_frame_buffering", r.ue(t), 1)
			expectTrailing(t, &r)
		})
	}
}

func TestPPSFields(t *testing.T) {
	t.Parallel()
	nal := buildPPS()
	r := bitReader{b: unescape(nal)}
	fields := []struct {
		name string
		read func() uint32
		want uint32
	}{
		{"nal header", func() uint32 { return r.u(t, 8) }, 0x68},
		{"pps id", func() uint32 { return r.ue(t) }, 0},
		{"sps id", func() uint32 { return r.ue(t) }, 0},
		{"entropy_coding_mode_flag", func() uint32 { return r.u(t, 1) }, 0},
		{"bottom_field_pic_order_in_frame_present_flag", func() uint32 { return r.u(t, 1) }, 0},
		{"num_slice_groups_minus1", func() uint32 { return r.ue(t) }, 0},
		{"num_ref_idx_l0_default_active_minus1", func() uint32 { return r.ue(t) }, 0},
		{"num_ref_idx_l1_default_active_minus1", func() uint32 { return r.ue(t) }, 0},
		{"weighted_pred_flag", func() uint32 { return r.u(t, 1) }, 0},
		{"weighted_bipred_idc", func() uint32 { return r.u(t, 2) }, 0},
		{"pic_init_qp_minus26", func() uint32 { return uint32(r.se(t)) }, 0},
		{"pic_init_qs_minus26", func() uint32 { return uint32(r.se(t)) }, 0},
		{"chroma_qp_index_offset", func() uint32 { return uint32(r.se(t)) }, 0},
		{"deblocking_filter_control_present_flag", func() uint32 { return r.u(t, 1) }, 1},
		{"constrained_intra_pred_flag", func() uint32 { return r.u(t, 1) }, 0},
		{"redundant_pic_cnt_present_flag", func() uint32 { return r.u(t, 1) }, 0},
	}
	for _, f := range fields {
		if got := f.read(); got != f.want {
			t.Errorf("%s = %d, want %d", f.name, got, f.want)
		}
	}
	expectTrailing(t, &r)
}

// expectTrailing checks rbsp_trailing_bits and that nothing follows.
func expectTrailing(t *testing.T, r *bitReader) {
	t.Helper()
	if !r.flag(t) {
		t.Fatal("rbsp_stop_one_bit missing")
	}
	for r.pos%8 != 0 {
		if r.flag(t) {
			t.Fatal("rbsp_alignment_zero_bit is 1")
		}
	}
	if r.pos != 8*len(r.b) {
		t.Fatalf("%d bytes after rbsp_trailing_bits", len(r.b)-r.pos/8)
	}
}

// TestSliceSyntax decodes the slice NAL units of a short video with the
// test bit reader: headers field by field, then every macroblock, checking
// that coded macroblocks are exactly the changed ones, carry the samples
// picture.go draws, and that the rest are skipped.
func TestSliceSyntax(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ w, h, frames int }{{200, 120, 30}, {16, 16, 5}, {50, 34, 12}} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			g := newGeometry(c.w, c.h)
			sc := newScene(g, 24, 7)
			const bitsFN = 7
			var buf bytes.Buffer
			sink := newNALSink(&buf, flushSize)
			enc := newFrameEncoder(sc, bitsFN, sink)
			var prevState frameState
			for n := range c.frames {
				buf.Reset()
				size := enc.encode(n)
				sink.flush()
				nal := buf.Bytes()
				if int64(len(nal)) != size {
					t.Fatalf("frame %d: encode returned %d, wrote %d", n, size, len(nal))
				}
				if hasStartCodeEmulation(nal) {
					t.Fatalf("frame %d: start code emulation in NAL", n)
				}
				r := bitReader{b: unescape(nal)}
				cur := sc.state(n)
				checkSlice(t, &r, sc, n, bitsFN, &prevState, &cur)
				prevState = cur
			}
		})
	}
}

func checkSlice(t *testing.T, r *bitReader, sc *scene, n int, bitsFN int, prev, cur *frameState) {
	t.Helper()
	expect := func(name string, got, want uint32) {
		t.Helper()
		if got != want {
			t.Fatalf("frame %d: %s = %d, want %d", n, name, got, want)
		}
	}
	idr := n == 0
	if idr {
		expect("nal header", r.u(t, 8), 0x65)
	} else {
		expect("nal header", r.u(t, 8), 0x41)
	}
	expect("first_mb_in_slice", r.ue(t), 0)
	if idr {
		expect("slice_type", r.ue(t), 7)
	} else {
		expect("slice_type", r.ue(t), 5)
	}
	expect("pps id", r.ue(t), 0)
	expect("frame_num", r.u(t, bitsFN), uint32(n))
	if idr {
		expect("idr_pic_id", r.ue(t), 0)
		expect("no_output_of_prior_pics_flag", r.u(t, 1), 0)
		expect("long_term_reference_flag", r.u(t, 1), 0)
	} else {
		expect("num_ref_idx_active_override_flag", r.u(t, 1), 0)
		expect("ref_pic_list_modification_flag_l0", r.u(t, 1), 0)
		expect("adaptive_ref_pic_marking_mode_flag", r.u(t, 1), 0)
	}
	expect("slice_qp_delta", uint32(r.se(t)), 0)
	expect("disable_deblocking_filter_idc", r.ue(t), 1)

	g := sc.geo
	total := g.mbs()
	var want [mbBytes]byte
	coded := 0
	for addr := 0; addr < total; {
		if !idr {
			run := int(r.ue(t))
			for i := range run {
				a := addr + i
				if a >= total {
					t.Fatalf("frame %d: skip run %d at %d passes the picture end", n, run, addr)
				}
				if sc.changed(prev, cur, a%g.mbw, a/g.mbw) {
					t.Fatalf("frame %d: changed macroblock %d skipped", n, a)
				}
			}
			addr += run
			if addr == total {
				break
			}
			if !sc.changed(prev, cur, addr%g.mbw, addr/g.mbw) {
				t.Fatalf("frame %d: unchanged macroblock %d coded", n, addr)
			}
			expect("mb_type", r.ue(t), 30)
		} else {
			expect("mb_type", r.ue(t), 25)
		}
		for r.pos%8 != 0 {
			expect("pcm_alignment_zero_bit", r.u(t, 1), 0)
		}
		sc.fillMB(cur, addr%g.mbw, addr/g.mbw, &want)
		got := r.b[r.pos/8 : r.pos/8+mbBytes]
		if !bytes.Equal(got, want[:]) {
			t.Fatalf("frame %d: macroblock %d samples differ", n, addr)
		}
		r.pos += 8 * mbBytes
		addr++
		coded++
	}
	if !idr && coded == 0 {
		t.Errorf("frame %d: nothing coded, nothing moved", n)
	}
	expectTrailing(t, r)
}
