package mp4synth

import (
	"encoding/binary"
	"math"
)

// mbBytes is one I_PCM macroblock: 16x16 luma, then 8x8 Cb and 8x8 Cr.
const mbBytes = 256 + 2*64

// Sample ranges. Keeping every sample inside video range is also what makes
// nalSink.skipPCM exact: no sample is ever 0x00..0x03.
const (
	minSample  = 16
	maxLuma    = 235
	maxChroma  = 240
	checkerAdd = 14 // luma lift of every other background tile
)

// yuv is a BT.709 limited-range colour.
type yuv struct{ y, u, v uint8 }

// rgbToYUV converts 8-bit RGB with the BT.709 matrix the SPS VUI declares.
func rgbToYUV(r, g, b float64) yuv {
	y := 0.2126*r + 0.7152*g + 0.0722*b
	u := (b - y) / 1.8556
	v := (r - y) / 1.5748
	return yuv{
		y: clampSample(16+219*y/255, maxLuma),
		u: clampSample(128+224*u/255, maxChroma),
		v: clampSample(128+224*v/255, maxChroma),
	}
}

func clampSample(f float64, hi int) uint8 {
	v := int(f + 0.5)
	return uint8(min(max(v, minSample), hi))
}

// palette holds vivid colours that stand out against the muted background.
var palette = [...][3]float64{
	{235, 50, 50}, {250, 150, 30}, {245, 225, 40}, {60, 200, 80},
	{40, 210, 220}, {50, 90, 240}, {200, 60, 220}, {250, 250, 250},
}

// scene is the whole video as a pure function of (frame, x, y): a static
// background with a bouncing ball and a sliding square on top. Being a pure
// function is what lets the encoder render any macroblock of any frame on
// demand, twice if needed, without storing pictures.
type scene struct {
	geo geometry

	// The background is separable: luma = bgRow[tile row parity][x] +
	// rowY[y], Cb = colU[cx], Cr = rowV[cy]. Tables span the coded
	// (padded) size, so rendering needs no division and, for luma, works
	// eight samples at a time.
	bgRow [2][]uint8
	rowY  []uint8
	rowT  []uint8 // checker tile parity of each luma row
	colU  []uint8
	rowV  []uint8

	ball struct {
		r, x0, y0, vx, vy int
		c                 yuv
	}
	box struct {
		side, x0, y0, vx, vy int
		c                    yuv
	}
}

// frameState is where the objects are in one frame.
type frameState struct {
	ballX, ballY int // centre
	boxX, boxY   int // top-left corner
}

// splitmix64 is a tiny deterministic PRNG: the same Seed must give the same
// bytes on every Go version, which math/rand does not promise.
type splitmix64 uint64

func (s *splitmix64) next() uint64 {
	*s += 0x9E3779B97F4A7C15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// intn returns a value in [lo, hi].
func (s *splitmix64) intn(lo, hi int) int { return lo + int(s.next()%uint64(hi-lo+1)) }

func newScene(g geometry, fps int, seed int64) *scene {
	rng := splitmix64(seed)
	s := &scene{geo: g}
	pw, ph := g.mbw*16, g.mbh*16

	tile := max(8, min(g.width, g.height)/8)
	yBase := rng.intn(50, 80)
	du, dv := rng.intn(-40, 40), rng.intn(-40, 40)
	// Luma sums stay below 256 (80+39+14+59), which the eight-at-a-time
	// addition in fillMB relies on: no carry crosses into the next sample.
	s.bgRow[0], s.bgRow[1] = make([]uint8, pw), make([]uint8, pw)
	for x := range pw {
		ramp := uint8(yBase + 40*x/pw)
		colT := x / tile % 2
		for rowT := range 2 {
			s.bgRow[rowT][x] = ramp
			if colT != rowT { // checkerboard: lift tiles of mixed parity
				s.bgRow[rowT][x] += checkerAdd
			}
		}
	}
	s.rowY, s.rowT = make([]uint8, ph), make([]uint8, ph)
	for y := range ph {
		s.rowY[y] = uint8(60 * y / ph)
		s.rowT[y] = uint8(y / tile % 2)
	}
	s.colU = make([]uint8, pw/2)
	for cx := range pw / 2 {
		s.colU[cx] = uint8(128 + du*(4*cx-pw)/pw)
	}
	s.rowV = make([]uint8, ph/2)
	for cy := range ph / 2 {
		s.rowV[cy] = uint8(128 + dv*(4*cy-ph)/ph)
	}

	short := min(g.width, g.height)
	// Speeds make an object cross the picture in roughly 2 to 5 seconds,
	// and are at least 1 sample per frame so something always moves.
	speed := func(extent int) int {
		v := max(1, extent*rng.intn(60, 140)/(100*3*fps))
		if rng.next()%2 == 0 {
			v = -v
		}
		return v
	}
	ci := rng.intn(0, len(palette)-1)
	cj := (ci + rng.intn(1, len(palette)-1)) % len(palette)

	b := &s.ball
	b.r = max(2, short/10)
	b.x0, b.y0 = rng.intn(0, 4*g.width), rng.intn(0, 4*g.height)
	b.vx, b.vy = speed(g.width), speed(g.height)
	b.c = rgbToYUV(palette[ci][0], palette[ci][1], palette[ci][2])

	q := &s.box
	q.side = max(4, short/7)
	q.x0, q.y0 = rng.intn(0, 4*g.width), rng.intn(0, 4*g.height)
	q.vx, q.vy = speed(g.width), speed(g.height)/2
	q.c = rgbToYUV(palette[cj][0], palette[cj][1], palette[cj][2])
	return s
}

// bounce maps an unbounded position onto [0, span] by reflecting at both
// ends, so positions are a closed-form function of the frame number.
func bounce(p, span int) int {
	if span <= 0 {
		return 0
	}
	p %= 2 * span
	if p < 0 {
		p += 2 * span
	}
	if p > span {
		p = 2*span - p
	}
	return p
}

// state places the objects inside the visible picture for frame n.
func (s *scene) state(n int) frameState {
	b, q, g := &s.ball, &s.box, s.geo
	return frameState{
		ballX: b.r + bounce(b.x0+b.vx*n, g.width-1-2*b.r),
		ballY: b.r + bounce(b.y0+b.vy*n, g.height-1-2*b.r),
		boxX:  bounce(q.x0+q.vx*n, g.width-q.side),
		boxY:  bounce(q.y0+q.vy*n, g.height-q.side),
	}
}

// span is the half-open range [lo, hi) of luma x positions an object
// covers on one row.
type span struct{ lo, hi int }

// boxSpan and ballSpan define object coverage; touches and fillMB both
// derive from the same geometry (a square, and the disc dx²+dy² <= r²).
func (s *scene) boxSpan(st *frameState, y int) span {
	if y < st.boxY || y >= st.boxY+s.box.side {
		return span{}
	}
	return span{st.boxX, st.boxX + s.box.side}
}

func (s *scene) ballSpan(st *frameState, y int) span {
	dy := y - st.ballY
	rest := s.ball.r*s.ball.r - dy*dy
	if rest < 0 {
		return span{}
	}
	hw := isqrt(rest)
	return span{st.ballX - hw, st.ballX + hw + 1}
}

// isqrt returns floor(sqrt(n)) exactly, for n >= 0.
func isqrt(n int) int {
	v := int(math.Sqrt(float64(n)))
	for v*v > n {
		v--
	}
	for (v+1)*(v+1) <= n {
		v++
	}
	return v
}

// touches reports whether any sample of the macroblock whose top-left luma
// sample is (x0, y0) is covered by an object in st; if not, the macroblock
// is pure background.
func (s *scene) touches(st *frameState, x0, y0 int) bool {
	q := s.box.side
	if st.boxX < x0+16 && x0 < st.boxX+q && st.boxY < y0+16 && y0 < st.boxY+q {
		return true
	}
	// Nearest sample of the macroblock to the ball centre.
	dx := min(max(st.ballX, x0), x0+15) - st.ballX
	dy := min(max(st.ballY, y0), y0+15) - st.ballY
	return dx*dx+dy*dy <= s.ball.r*s.ball.r
}

// changed reports whether macroblock (mbx, mby) may differ between the
// frames in prev and cur; if not, the P slice codes it as P_Skip, which
// copies it from the previous (reference) frame.
func (s *scene) changed(prev, cur *frameState, mbx, mby int) bool {
	return s.touches(prev, mbx*16, mby*16) || s.touches(cur, mbx*16, mby*16)
}

const bytesOf8 = 0x0101010101010101 // multiplier that repeats a byte 8 times

// fillMB renders macroblock (mbx, mby) of the frame in st into out in
// I_PCM order: 256 luma samples in raster order, then 64 Cb, then 64 Cr.
// Chroma is point-sampled at the top-left luma sample of each 2x2 block.
func (s *scene) fillMB(st *frameState, mbx, mby int, out *[mbBytes]byte) {
	x0, y0 := mbx*16, mby*16
	for j := range 16 {
		y := y0 + j
		pat := s.bgRow[s.rowT[y]][x0 : x0+16]
		add := uint64(s.rowY[y]) * bytesOf8
		row := out[j*16 : j*16+16]
		binary.LittleEndian.PutUint64(row[0:], binary.LittleEndian.Uint64(pat[0:])+add)
		binary.LittleEndian.PutUint64(row[8:], binary.LittleEndian.Uint64(pat[8:])+add)
	}
	cb, cr := out[256:320], out[320:384]
	for j := range 8 {
		copy(cb[j*8:j*8+8], s.colU[x0/2:x0/2+8])
		binary.LittleEndian.PutUint64(cr[j*8:], uint64(s.rowV[y0/2+j])*bytesOf8)
	}
	if !s.touches(st, x0, y0) {
		return
	}
	// Objects, box first so the ball passes in front of it.
	for j := range 16 {
		y := y0 + j
		row := out[j*16 : j*16+16]
		paint(row, x0, s.boxSpan(st, y), s.box.c.y)
		paint(row, x0, s.ballSpan(st, y), s.ball.c.y)
	}
	// Chroma sample cx sits on luma x = 2cx, covered when lo <= 2cx < hi.
	half := func(sp span) span { return span{(sp.lo + 1) / 2, (sp.hi + 1) / 2} }
	for j := range 8 {
		y := y0 + 2*j
		bs, ls := half(s.boxSpan(st, y)), half(s.ballSpan(st, y))
		paint(cb[j*8:j*8+8], x0/2, bs, s.box.c.u)
		paint(cr[j*8:j*8+8], x0/2, bs, s.box.c.v)
		paint(cb[j*8:j*8+8], x0/2, ls, s.ball.c.u)
		paint(cr[j*8:j*8+8], x0/2, ls, s.ball.c.v)
	}
}

// paint sets the samples of row (which starts at position x0) inside sp.
func paint(row []byte, x0 int, sp span, v byte) {
	lo, hi := max(sp.lo-x0, 0), min(sp.hi-x0, len(row))
	for i := lo; i < hi; i++ {
		row[i] = v
	}
}
