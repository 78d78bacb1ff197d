package testkit

import (
	"embed"
	"testing"
)

// tones are real encoder output, a 440 Hz sine at 8 kHz mono, made once with
//
//	ffmpeg -f lavfi -i "sine=frequency=440:sample_rate=8000:duration=S" -ac 1 -b:a 8k -metadata title="tone S s" tone-Ss.mp3
//	ffmpeg -f lavfi -i "sine=frequency=440:sample_rate=8000:duration=3" -ac 1 -c:a pcm_u8 -metadata title=tone tone-3s.wav
//	ffmpeg -f lavfi -i "sine=frequency=440:sample_rate=8000:duration=2" -ac 1 -c:a aac -b:a 8k tone-2s.m4a
//
// so that the MP3s start with an ID3v2 tag and the WAV holds a LIST chunk before its data, as files from
// the field do.
//
//go:embed testdata/tone-1s.mp3 testdata/tone-3s.mp3 testdata/tone-16s.mp3 testdata/tone-3s.wav testdata/tone-2s.m4a
var tones embed.FS

// Tone returns one of the recorded tones: "1s.mp3", "3s.mp3", "16s.mp3", "3s.wav" or "2s.m4a".
func Tone(t testing.TB, name string) []byte {
	t.Helper()
	b, err := tones.ReadFile("testdata/tone-" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
