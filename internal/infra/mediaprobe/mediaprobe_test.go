package mediaprobe_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"testing"

	"github.com/Eyevinn/mp4ff/mp4"

	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/internal/infra/mediaprobe"
	"videogen/internal/testkit"
)

// webp1x1 is a 1x1 lossless WebP (the format has no encoder in Go's libraries).
const webp1x1 = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

func movie(t testing.TB, w, h, secs int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := mp4synth.Write(&buf, mp4synth.Params{Width: w, Height: h, Seconds: secs}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// moovLast rewrites a movie with its media data before its movie header, as a file written without
// "fast start" is: the probe has to stream past the media to reach the header.
func moovLast(t testing.TB, b []byte) []byte {
	t.Helper()
	f, err := mp4.DecodeFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, box := range []mp4.Box{f.Ftyp, f.Mdat, f.Moov} {
		if err := box.Encode(&out); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// TestProbe: what each accepted image and video format says of its size (and a video of its
// duration), read as the file streams through a Prober, as an upload does; formats that are not
// probed, and files that cannot be read, give nothing.
func TestProbe(t *testing.T) {
	webp, _ := base64.StdEncoding.DecodeString(webp1x1)
	mp4720 := movie(t, 1280, 720, 5)
	cases := []struct {
		name, contentType string
		body              []byte
		want              mediaprobe.Probe
	}{
		{"png", "image/png", testkit.PNG(t, 640, 360), mediaprobe.Probe{Width: 640, Height: 360}},
		{"jpeg", "image/jpeg", testkit.JPEG(t, 300, 6000/10), mediaprobe.Probe{Width: 300, Height: 600}},
		{"webp", "image/webp", webp, mediaprobe.Probe{Width: 1, Height: 1}},
		{"mp4, header first", "video/mp4", mp4720, mediaprobe.Probe{Width: 1280, Height: 720, DurationMs: 5000}},
		{"mp4, header last", "video/mp4", moovLast(t, movie(t, 834, 1112, 2)), mediaprobe.Probe{Width: 834, Height: 1112, DurationMs: 2000}},
		{"mov", "video/quicktime", movie(t, 640, 640, 15), mediaprobe.Probe{Width: 640, Height: 640, DurationMs: 15000}},
		{"truncated mp4", "video/mp4", mp4720[:200], mediaprobe.Probe{}},
		{"not an image", "image/png", []byte("not a png at all"), mediaprobe.Probe{}},
		{"mp3 with an ID3v2 tag", "audio/mpeg", testkit.Tone(t, "3s.mp3"), mediaprobe.Probe{DurationMs: 3000}},
		{"mp3 of 16 s", "audio/mpeg", testkit.Tone(t, "16s.mp3"), mediaprobe.Probe{DurationMs: 16000}},
		{"wav with a LIST chunk", "audio/wav", testkit.Tone(t, "3s.wav"), mediaprobe.Probe{DurationMs: 3000}},
		{"wav of 6 s", "audio/wav", testkit.WAV(48000), mediaprobe.Probe{DurationMs: 6000}},
		{"m4a", "audio/mp4", testkit.Tone(t, "2s.m4a"), mediaprobe.Probe{DurationMs: 2000}},
		{"not an mp3", "audio/mpeg", []byte("ID3"), mediaprobe.Probe{}},
		{"wav cut before its data", "audio/wav", testkit.Tone(t, "3s.wav")[:60], mediaprobe.Probe{}},
		{"aac", "audio/aac", []byte{0xff, 0xf1}, mediaprobe.Probe{}},
		{"webm", "video/webm", []byte{0x1a, 0x45, 0xdf, 0xa3}, mediaprobe.Probe{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mediaprobe.Start(c.contentType)
			if p != nil {
				// Small writes, as a network upload arrives.
				for b := c.body; len(b) > 0; {
					n := min(len(b), 1000)
					_, _ = p.Write(b[:n])
					b = b[n:]
				}
			}
			if got := p.Finish(); got != c.want {
				t.Fatalf("streamed: %+v, want %+v", got, c.want)
			}
			got, _ := mediaprobe.Read(c.contentType, bytes.NewReader(c.body))
			if got != c.want {
				t.Fatalf("read: %+v, want %+v", got, c.want)
			}
		})
	}
}

// FuzzAudio: no byte string makes the MP3 or WAV probe panic, hang or claim a negative duration.
func FuzzAudio(f *testing.F) {
	f.Add(testkit.Tone(f, "1s.mp3"), true)
	f.Add(testkit.Tone(f, "3s.wav")[:200], false)
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEfmt \xff\xff\xff\xff"), false)
	f.Fuzz(func(t *testing.T, b []byte, isMP3 bool) {
		ctype := "audio/wav"
		if isMP3 {
			ctype = "audio/mpeg"
		}
		p := mediaprobe.Start(ctype)
		_, _ = io.Copy(p, bytes.NewReader(b))
		if got := p.Finish(); got.DurationMs < 0 {
			t.Fatalf("negative probe %+v", got)
		}
	})
}

// FuzzMovie: no byte string makes the movie probe panic or hang, whatever it claims of its boxes.
func FuzzMovie(f *testing.F) {
	f.Add(movie(f, 64, 64, 1))
	f.Add(moovLast(f, movie(f, 64, 48, 1)))
	f.Add([]byte("\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := mediaprobe.Start("video/mp4")
		_, _ = io.Copy(p, bytes.NewReader(b))
		got := p.Finish()
		if got.Width < 0 || got.Height < 0 || got.DurationMs < 0 {
			t.Fatalf("negative probe %+v", got)
		}
	})
}
