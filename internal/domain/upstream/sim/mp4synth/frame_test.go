package mp4synth

import (
	"fmt"
	"testing"
)

// TestFrameIsThePicture: Frame at the video's size is exactly the decoded picture (frameYCbCr, which
// TestDecodedPixelsExact checks against ffmpeg) converted to RGB, pixel for pixel; smaller, each pixel is
// its nearest full-size pixel. Sizes are not multiples of 16; frames include ones where objects move.
func TestFrameIsThePicture(t *testing.T) {
	for _, p := range []Params{
		{Width: 200, Height: 120, Seconds: 2, Seed: 4},
		{Width: 1470, Height: 630, Seconds: 1, Seed: 8},
		{Width: 64, Height: 1080, Seconds: 1, Seed: 99},
	} {
		for _, n := range []int{0, 7, 23} {
			t.Run(fmt.Sprintf("%dx%d frame %d", p.Width, p.Height, n), func(t *testing.T) {
				ycc, err := frameYCbCr(p, n)
				if err != nil {
					t.Fatal(err)
				}
				want := func(x, y int) [3]uint8 {
					l := bt709.y[ycc.Y[ycc.YOffset(x, y)]]
					ci := ycc.COffset(x, y)
					cb, cr := ycc.Cb[ci], ycc.Cr[ci]
					return [3]uint8{clamp16(l + bt709.rCr[cr]), clamp16(l - bt709.gCb[cb] - bt709.gCr[cr]), clamp16(l + bt709.bCb[cb])}
				}
				for _, size := range [][2]int{{p.Width, p.Height}, {p.Width / 3, p.Height / 5}} {
					img, err := Frame(p, n, size[0], size[1])
					if err != nil {
						t.Fatal(err)
					}
					for j := range size[1] {
						for i := range size[0] {
							o := img.PixOffset(i, j)
							got := [3]uint8{img.Pix[o], img.Pix[o+1], img.Pix[o+2]}
							if w := want(i*p.Width/size[0], j*p.Height/size[1]); got != w {
								t.Fatalf("%dx%d: pixel (%d,%d) is %v, the picture's %v", size[0], size[1], i, j, got, w)
							}
						}
					}
				}
			})
		}
	}
	if _, err := Frame(Params{Width: 64, Height: 64, Seconds: 1}, 24, 64, 64); err == nil {
		t.Error("frame 24 of a 1-second video was rendered")
	}
	if _, err := Frame(Params{Width: 64, Height: 64, Seconds: 1}, 0, 65, 64); err == nil {
		t.Error("a frame larger than the video was rendered")
	}
}
