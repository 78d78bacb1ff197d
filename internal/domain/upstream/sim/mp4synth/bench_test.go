package mp4synth

import (
	"io"
	"testing"
)

func benchmarkWrite(b *testing.B, p Params) {
	size, err := Size(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Write(io.Discard, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWrite1080p4s and BenchmarkWrite1080p15s should report about the
// same B/op: memory is bounded by buffers, not by the video length.
func BenchmarkWrite1080p4s(b *testing.B) {
	benchmarkWrite(b, Params{Width: 1920, Height: 1080, Seconds: 4})
}

func BenchmarkWrite1080p15s(b *testing.B) {
	benchmarkWrite(b, Params{Width: 1920, Height: 1080, Seconds: 15})
}

func BenchmarkSize1080p15s(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Size(Params{Width: 1920, Height: 1080, Seconds: 15}); err != nil {
			b.Fatal(err)
		}
	}
}
