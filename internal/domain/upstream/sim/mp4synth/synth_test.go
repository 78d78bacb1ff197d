package mp4synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
)

func TestSizeMatchesWrite(t *testing.T) {
	t.Parallel()
	for _, p := range []Params{
		{Width: 992, Height: 432, Seconds: 4},
		{Width: 1470, Height: 630, Seconds: 2, Seed: 9},
		{Width: 18, Height: 30, Seconds: 1},
		{Width: 200, Height: 120, Seconds: 3, FPS: 30},
		{Width: 16, Height: 4096, Seconds: 1, FPS: 60},
	} {
		t.Run(fmt.Sprintf("%dx%d_%ds", p.Width, p.Height, p.Seconds), func(t *testing.T) {
			t.Parallel()
			size, err := Size(p)
			if err != nil {
				t.Fatalf("Size: %v", err)
			}
			var buf bytes.Buffer
			n, err := Write(&buf, p)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if n != int64(buf.Len()) {
				t.Errorf("Write returned %d, wrote %d bytes", n, buf.Len())
			}
			if size != int64(buf.Len()) {
				t.Errorf("Size = %d, Write produced %d bytes", size, buf.Len())
			}
		})
	}
}

func TestWriteIsDeterministic(t *testing.T) {
	t.Parallel()
	write := func(p Params) []byte {
		var buf bytes.Buffer
		if _, err := Write(&buf, p); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	p := Params{Width: 320, Height: 240, Seconds: 1, Seed: 5}
	a, b := write(p), write(p)
	if !bytes.Equal(a, b) {
		t.Error("same Params produced different files")
	}
	p.Seed = 6
	if bytes.Equal(a, write(p)) {
		t.Error("different Seed produced identical files")
	}
}

func TestInvalidParams(t *testing.T) {
	t.Parallel()
	ok := Params{Width: 64, Height: 64, Seconds: 1}
	cases := []struct {
		name string
		edit func(*Params)
	}{
		{"odd width", func(p *Params) { p.Width = 65 }},
		{"odd height", func(p *Params) { p.Height = 33 }},
		{"width too small", func(p *Params) { p.Width = 14 }},
		{"height too large", func(p *Params) { p.Height = 4098 }},
		{"zero seconds", func(p *Params) { p.Seconds = 0 }},
		{"too long", func(p *Params) { p.Seconds = 61 }},
		{"negative fps", func(p *Params) { p.FPS = -1 }},
		{"fps too high", func(p *Params) { p.FPS = 61 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			c.edit(&p)
			var buf bytes.Buffer
			n, err := Write(&buf, p)
			if !errors.Is(err, ErrInvalidParams) {
				t.Errorf("Write error = %v, want ErrInvalidParams", err)
			}
			if n != 0 || buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes for invalid params", buf.Len())
			}
			if _, err := Size(p); !errors.Is(err, ErrInvalidParams) {
				t.Errorf("Size error = %v, want ErrInvalidParams", err)
			}
		})
	}
	if _, err := Size(ok); err != nil {
		t.Errorf("valid params rejected: %v", err)
	}
}

// limitWriter fails once more than limit bytes were written, like a
// client hanging up mid-download.
type limitWriter struct {
	n, limit int
}

var errHangup = errors.New("connection reset")

func (w *limitWriter) Write(p []byte) (int, error) {
	if w.n+len(p) > w.limit {
		k := w.limit - w.n
		w.n = w.limit
		return k, errHangup
	}
	w.n += len(p)
	return len(p), nil
}

func TestWriteReportsWriterErrors(t *testing.T) {
	t.Parallel()
	p := Params{Width: 640, Height: 480, Seconds: 2}
	for _, limit := range []int{0, 100, 300_000} {
		w := &limitWriter{limit: limit}
		n, err := Write(w, p)
		if !errors.Is(err, errHangup) {
			t.Errorf("limit %d: error = %v, want wrapped %v", limit, err, errHangup)
		}
		if n != int64(limit) {
			t.Errorf("limit %d: Write returned n = %d", limit, n)
		}
	}
}

// totalAlloc measures bytes allocated by f. Callers must not run in
// parallel with other tests, or their allocations would be counted too.
func totalAlloc(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMemoryDoesNotGrowWithLength is deliberately not parallel so that
// TotalAlloc only sees this test. Bounded memory means a 15 s 1080p video
// allocates about what a 4 s one does (a few bytes per extra frame for the
// sample tables), and far less than one 3 MB I_PCM frame.
func TestMemoryDoesNotGrowWithLength(t *testing.T) {
	measure := func(seconds int) uint64 {
		return totalAlloc(func() {
			if _, err := Write(io.Discard, Params{Width: 1920, Height: 1080, Seconds: seconds}); err != nil {
				t.Fatal(err)
			}
		})
	}
	a4, a15 := measure(4), measure(15)
	t.Logf("allocated: 4 s 1080p %d bytes, 15 s 1080p %d bytes", a4, a15)
	// One 1080p I_PCM frame is 3 MB; we stay under a tenth of that.
	const limit = 256 << 10
	if a15 > limit {
		t.Errorf("15 s 1080p write allocated %d bytes, want < %d", a15, limit)
	}
	if a15 > a4+64<<10 {
		t.Errorf("allocation grows with length: 4 s %d bytes, 15 s %d bytes", a4, a15)
	}
}
