package mp4synth

import (
	"fmt"
	"testing"
)

func TestChooseLevel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		w, h, fps int
		mbps      int64 // peak Mbit/s
		want      uint8
	}{
		{16, 16, 24, 0, 10},
		{176, 144, 15, 0, 10},  // QCIF: 99 MBs, 1485 MB/s
		{176, 144, 30, 0, 11},  // twice the macroblock rate
		{992, 432, 24, 0, 31},  // 1674 MBs > level 3's 1620
		{1280, 720, 24, 0, 31}, // 3600 MBs
		{1920, 1080, 24, 0, 40},
		{1440, 1440, 24, 0, 40},
		{1664, 1248, 24, 0, 40},
		{1080, 1920, 24, 0, 40},
		{2206, 946, 24, 0, 42}, // 8280 MBs > 8192
		{1920, 1080, 60, 0, 42},
		{4096, 16, 24, 0, 40}, // width 256 MBs needs MaxFS >= 8192
		{4096, 4096, 24, 0, 60},
		{4096, 4096, 60, 0, 60},
		{1920, 1080, 24, 30, 41},
		{1920, 1080, 24, 100, 50},
		{1920, 1080, 24, 1_000_000, 40}, // nothing covers the bitrate: size decides
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%dx%d@%d/%dMbps", c.w, c.h, c.fps, c.mbps), func(t *testing.T) {
			g := newGeometry(c.w, c.h)
			if got := chooseLevel(g.mbw, g.mbh, c.fps, c.mbps*1_000_000); got != c.want {
				t.Errorf("level = %d, want %d", got, c.want)
			}
		})
	}
}

func TestPeakBitsPerSecond(t *testing.T) {
	t.Parallel()
	cases := []struct {
		sizes []uint32
		fps   int
		want  int64
	}{
		{[]uint32{100}, 24, 800},
		{[]uint32{10, 1, 1, 1}, 2, 88},
		{[]uint32{1, 1, 10, 10, 1}, 2, 160},
		{[]uint32{5, 5, 5, 5}, 1, 40},
	}
	for _, c := range cases {
		if got := peakBitsPerSecond(c.sizes, c.fps); got != c.want {
			t.Errorf("peakBitsPerSecond(%v, %d) = %d, want %d", c.sizes, c.fps, got, c.want)
		}
	}
}
