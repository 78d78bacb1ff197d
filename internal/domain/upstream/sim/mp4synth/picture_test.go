package mp4synth

import (
	"fmt"
	"testing"
)

func TestBounce(t *testing.T) {
	t.Parallel()
	cases := []struct{ p, span, want int }{
		{0, 10, 0}, {3, 10, 3}, {10, 10, 10}, {11, 10, 9}, {20, 10, 0},
		{21, 10, 1}, {-1, 10, 1}, {-10, 10, 10}, {-11, 10, 9}, {5, 0, 0}, {5, -3, 0},
	}
	for _, c := range cases {
		if got := bounce(c.p, c.span); got != c.want {
			t.Errorf("bounce(%d, %d) = %d, want %d", c.p, c.span, got, c.want)
		}
	}
}

// TestSamplesInVideoRange guards the invariant nalSink.skipPCM relies on.
func TestSamplesInVideoRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w, h int
		seed int64
	}{{16, 16, 0}, {992, 432, 1}, {560, 752, -5}, {1920, 1080, 99}, {34, 4096, 3}} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			g := newGeometry(c.w, c.h)
			sc := newScene(g, 24, c.seed)
			var mb [mbBytes]byte
			for _, n := range []int{0, 37, 1439} {
				st := sc.state(n)
				for mby := range g.mbh {
					for mbx := range g.mbw {
						sc.fillMB(&st, mbx, mby, &mb)
						for i, v := range mb {
							hi := byte(maxChroma)
							if i < 256 {
								hi = maxLuma
							}
							if v < minSample || v > hi {
								t.Fatalf("frame %d mb (%d,%d) sample %d = %d out of [%d, %d]", n, mbx, mby, i, v, minSample, hi)
							}
						}
					}
				}
			}
		})
	}
}

// TestObjectsStayInside checks the bounce spans: objects never leave the
// visible picture, so cropping never hides them.
func TestObjectsStayInside(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ w, h int }{{16, 16}, {18, 30}, {992, 432}, {4096, 16}} {
		sc := newScene(newGeometry(c.w, c.h), 24, 11)
		for n := range 2000 {
			st := sc.state(n)
			r, s := sc.ball.r, sc.box.side
			if st.ballX-r < 0 || st.ballX+r >= c.w || st.ballY-r < 0 || st.ballY+r >= c.h {
				t.Fatalf("%dx%d frame %d: ball at (%d,%d) r=%d leaves the picture", c.w, c.h, n, st.ballX, st.ballY, r)
			}
			if st.boxX < 0 || st.boxX+s > c.w || st.boxY < 0 || st.boxY+s > c.h {
				t.Fatalf("%dx%d frame %d: box at (%d,%d) side=%d leaves the picture", c.w, c.h, n, st.boxX, st.boxY, s)
			}
		}
	}
}

// TestSkippedMacroblocksAreUnchanged is the property P_Skip correctness
// rests on: a macroblock not flagged as changed renders identically in
// consecutive frames. It also checks that things really move.
func TestSkippedMacroblocksAreUnchanged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w, h, fps, frames int
		seed              int64
	}{
		{200, 120, 24, 96, 1},
		{64, 48, 24, 120, 2},
		{16, 16, 24, 48, 3},
		{330, 186, 60, 120, 4},
		{96, 400, 5, 60, 5},
	} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			g := newGeometry(c.w, c.h)
			sc := newScene(g, c.fps, c.seed)
			var a, b [mbBytes]byte
			moving := 0
			prev := sc.state(0)
			for n := 1; n < c.frames; n++ {
				cur := sc.state(n)
				differs := false
				for mby := range g.mbh {
					for mbx := range g.mbw {
						sc.fillMB(&prev, mbx, mby, &a)
						sc.fillMB(&cur, mbx, mby, &b)
						if a == b {
							continue
						}
						differs = true
						if !sc.changed(&prev, &cur, mbx, mby) {
							t.Fatalf("frame %d: macroblock (%d,%d) differs but would be skipped", n, mbx, mby)
						}
					}
				}
				if differs {
					moving++
				}
				prev = cur
			}
			if moving < (c.frames-1)*9/10 {
				t.Errorf("only %d of %d frames show motion", moving, c.frames-1)
			}
		})
	}
}

func TestSeedChangesPicture(t *testing.T) {
	t.Parallel()
	g := newGeometry(640, 360)
	render := func(seed int64) []byte {
		sc := newScene(g, 24, seed)
		st := sc.state(0)
		var out []byte
		var mb [mbBytes]byte
		for mby := range g.mbh {
			for mbx := range g.mbw {
				sc.fillMB(&st, mbx, mby, &mb)
				out = append(out, mb[:]...)
			}
		}
		return out
	}
	a, b, a2 := render(1), render(2), render(1)
	if string(a) != string(a2) {
		t.Error("same seed renders differently")
	}
	if string(a) == string(b) {
		t.Error("different seeds render the same picture")
	}
}

// referenceMB renders a macroblock one sample at a time straight from the
// coverage definitions (disc dx²+dy² <= r², ball in front of box), as an
// independent check of fillMB's row spans and eight-at-a-time arithmetic.
func referenceMB(sc *scene, st *frameState, mbx, mby int) (out [mbBytes]byte) {
	object := func(x, y int) (yuv, bool) {
		dx, dy := x-st.ballX, y-st.ballY
		if dx*dx+dy*dy <= sc.ball.r*sc.ball.r {
			return sc.ball.c, true
		}
		if x >= st.boxX && x < st.boxX+sc.box.side && y >= st.boxY && y < st.boxY+sc.box.side {
			return sc.box.c, true
		}
		return yuv{}, false
	}
	for j := range 16 {
		for i := range 16 {
			x, y := mbx*16+i, mby*16+j
			v := int(sc.bgRow[sc.rowT[y]][x]) + int(sc.rowY[y])
			if c, ok := object(x, y); ok {
				v = int(c.y)
			}
			out[j*16+i] = byte(v)
		}
	}
	for j := range 8 {
		for i := range 8 {
			cx, cy := mbx*8+i, mby*8+j
			u, v := sc.colU[cx], sc.rowV[cy]
			if c, ok := object(2*cx, 2*cy); ok {
				u, v = c.u, c.v
			}
			out[256+j*8+i], out[320+j*8+i] = u, v
		}
	}
	return out
}

func TestFillMBMatchesReference(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w, h int
		seed int64
	}{{200, 120, 1}, {16, 16, 2}, {992, 432, 3}, {90, 530, 4}} {
		t.Run(fmt.Sprintf("%dx%d", c.w, c.h), func(t *testing.T) {
			g := newGeometry(c.w, c.h)
			sc := newScene(g, 24, c.seed)
			var got [mbBytes]byte
			for n := range 60 {
				st := sc.state(n)
				for mby := range g.mbh {
					for mbx := range g.mbw {
						if n > 0 && !sc.touches(&st, mbx*16, mby*16) {
							continue // plain background is checked on frame 0
						}
						sc.fillMB(&st, mbx, mby, &got)
						if want := referenceMB(sc, &st, mbx, mby); got != want {
							t.Fatalf("frame %d mb (%d,%d): fillMB differs from reference", n, mbx, mby)
						}
					}
				}
			}
		})
	}
}

func TestISqrt(t *testing.T) {
	t.Parallel()
	for n := range 200_000 {
		v := isqrt(n)
		if v*v > n || (v+1)*(v+1) <= n {
			t.Fatalf("isqrt(%d) = %d", n, v)
		}
	}
}
