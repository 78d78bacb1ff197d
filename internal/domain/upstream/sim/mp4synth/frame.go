package mp4synth

import (
	"fmt"
	"image"
)

// Frame renders frame n (0-based) of the video p describes as a viewer sees it, at w x h: the full
// picture when w, h are the video's size, else point-sampled (each pixel is the nearest pixel of the full
// picture), which costs only w*h pixel evaluations. It is how the simulator makes its outputs'
// thumbnail and spritesheet without decoding H.264; pixels are converted to RGB with the colour matrix
// and range the stream declares (BT.709, limited range).
func Frame(p Params, n, w, h int) (*image.RGBA, error) {
	p, err := p.normalize()
	if err != nil {
		return nil, err
	}
	if n < 0 || n >= p.frames() {
		return nil, fmt.Errorf("%w: frame %d not in [0, %d)", ErrInvalidParams, n, p.frames())
	}
	if w < 1 || h < 1 || w > p.Width || h > p.Height {
		return nil, fmt.Errorf("%w: %dx%d is not within the video's %dx%d", ErrInvalidParams, w, h, p.Width, p.Height)
	}
	sc := newScene(newGeometry(p.Width, p.Height), p.FPS, p.Seed)
	st := sc.state(n)
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for j := range h {
		y := j * p.Height / h
		// What covers this row: the objects' spans for luma at y, and for chroma at the 2x2 block's top
		// row (chroma is point-sampled at the block's top-left luma sample, as fillMB writes it).
		cy := y &^ 1
		r := rowCover{box: sc.boxSpan(&st, y), ball: sc.ballSpan(&st, y), cbox: sc.boxSpan(&st, cy), cball: sc.ballSpan(&st, cy)}
		bg, add := sc.bgRow[sc.rowT[y]], sc.rowY[y]
		crow := sc.rowV[cy/2]
		px := out.Pix[j*out.Stride : j*out.Stride+4*w]
		for i := range w {
			x := i * p.Width / w
			cx := x &^ 1
			yy, cb, cr := bg[x]+add, sc.colU[cx/2], crow
			if r.box.covers(x) {
				yy = sc.box.c.y
			}
			if r.ball.covers(x) {
				yy = sc.ball.c.y
			}
			if r.cbox.covers(cx) {
				cb, cr = sc.box.c.u, sc.box.c.v
			}
			if r.cball.covers(cx) {
				cb, cr = sc.ball.c.u, sc.ball.c.v
			}
			l := bt709.y[yy]
			px[4*i] = clamp16(l + bt709.rCr[cr])
			px[4*i+1] = clamp16(l - bt709.gCb[cb] - bt709.gCr[cr])
			px[4*i+2] = clamp16(l + bt709.bCb[cb])
			px[4*i+3] = 255
		}
	}
	return out, nil
}

// rowCover is what the objects cover on one row of a frame: box drawn first, the ball over it.
type rowCover struct{ box, ball, cbox, cball span }

func (sp span) covers(x int) bool { return sp.lo <= x && x < sp.hi }

// bt709 holds the BT.709 limited-range to full-range RGB conversion (the inverse of rgbToYUV) per
// sample value, in 16.16 fixed point, so a frame converts with table lookups and adds.
var bt709 = func() (t struct{ y, rCr, gCb, gCr, bCb [256]int32 }) {
	const one = 1 << 16
	for v := range 256 {
		fy, fc := float64(v-16), float64(v-128)
		t.y[v] = int32(255 / 219.0 * fy * one)
		t.rCr[v] = int32(255 / 224.0 * 1.5748 * fc * one)
		t.gCb[v] = int32(255 / 224.0 * 0.1873 * fc * one)
		t.gCr[v] = int32(255 / 224.0 * 0.4681 * fc * one)
		t.bCb[v] = int32(255 / 224.0 * 1.8556 * fc * one)
	}
	return t
}()

// clamp16 rounds a 16.16 fixed-point value to a byte.
func clamp16(v int32) uint8 { return uint8(min(max((v+1<<15)>>16, 0), 255)) }
