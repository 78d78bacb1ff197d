package mp4synth

import (
	"fmt"
	"image"
)

// frameYCbCr renders frame n (0-based) exactly as a decoder outputs it: the scene is a pure function of
// the frame number, and macroblocks a P frame skips are the ones the scene left unchanged, so rendering
// frame n directly equals decoding the stream up to it.
func frameYCbCr(p Params, n int) (*image.YCbCr, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	if n < 0 || n >= p.frames() {
		return nil, fmt.Errorf("%w: frame %d not in [0, %d)", ErrInvalidParams, n, p.frames())
	}
	geo := newGeometry(p.Width, p.Height)
	sc := newScene(geo, p.FPS, p.Seed)
	st := sc.state(n)
	img := image.NewYCbCr(image.Rect(0, 0, geo.mbw*16, geo.mbh*16), image.YCbCrSubsampleRatio420)
	var mb [mbBytes]byte
	for mby := range geo.mbh {
		for mbx := range geo.mbw {
			sc.fillMB(&st, mbx, mby, &mb)
			for j := range 16 {
				copy(img.Y[(mby*16+j)*img.YStride+mbx*16:], mb[j*16:j*16+16])
			}
			for j := range 8 {
				row := (mby*8+j)*img.CStride + mbx*8
				copy(img.Cb[row:row+8], mb[256+j*8:256+j*8+8])
				copy(img.Cr[row:row+8], mb[320+j*8:320+j*8+8])
			}
		}
	}
	// The coded picture is whole macroblocks; the stream crops it to the visible size.
	return img.SubImage(image.Rect(0, 0, p.Width, p.Height)).(*image.YCbCr), nil
}
