package mp4synth

// levelLimit is one row of H.264 Table A-1 with the limits this encoder can
// exceed: frame size, macroblock rate and bitrate. The DPB limit is implied
// because every level's MaxDpbMbs >= MaxFS and we use one reference frame.
type levelLimit struct {
	idc     uint8
	maxMBPS int64 // macroblocks per second
	maxFS   int64 // macroblocks per frame
	maxBR   int64 // kbit/s, Baseline factor 1000
}

// levels omits level 1b, which Baseline signals through constraint_set3 and
// which never helps: level 1.1 is only slightly larger.
var levels = []levelLimit{
	{10, 1485, 99, 64},
	{11, 3000, 396, 192},
	{12, 6000, 396, 384},
	{13, 11880, 396, 768},
	{20, 11880, 396, 2000},
	{21, 19800, 792, 4000},
	{22, 20250, 1620, 4000},
	{30, 40500, 1620, 10000},
	{31, 108000, 3600, 14000},
	{32, 216000, 5120, 20000},
	{40, 245760, 8192, 20000},
	{41, 245760, 8192, 50000},
	{42, 522240, 8704, 50000},
	{50, 589824, 22080, 135000},
	{51, 983040, 36864, 240000},
	{52, 2073600, 36864, 240000},
	{60, 4177920, 139264, 240000},
	{61, 8355840, 139264, 480000},
	{62, 16711680, 139264, 800000},
}

// chooseLevel returns the lowest level_idc whose limits hold for the
// picture size (A.3.1: frame size, and each side at most sqrt(8*MaxFS)
// macroblocks), the macroblock rate and the peak bitrate over any one-second
// window. I_PCM video is far above normal bitrates; when no level covers the
// bitrate the smallest level that fits the size and rate is returned, since
// software decoders do not enforce bitrate limits.
func chooseLevel(mbw, mbh, fps int, peakBitsPerSecond int64) uint8 {
	fs := int64(mbw) * int64(mbh)
	var sizeOK uint8
	for _, l := range levels {
		if fs > l.maxFS || int64(mbw)*int64(mbw) > 8*l.maxFS || int64(mbh)*int64(mbh) > 8*l.maxFS || fs*int64(fps) > l.maxMBPS {
			continue
		}
		if sizeOK == 0 {
			sizeOK = l.idc
		}
		if peakBitsPerSecond <= l.maxBR*1000 {
			return l.idc
		}
	}
	if sizeOK == 0 {
		return levels[len(levels)-1].idc
	}
	return sizeOK
}

// peakBitsPerSecond is the largest number of bits in any window of fps
// consecutive samples.
func peakBitsPerSecond(sizes []uint32, fps int) int64 {
	var sum, peak int64
	for i, s := range sizes {
		sum += int64(s)
		if i >= fps {
			sum -= int64(sizes[i-fps])
		}
		peak = max(peak, sum)
	}
	return peak * 8
}
