package media

import (
	"strings"
	"testing"
	"time"

	"videogen/internal/refusal"
)

func TestSniffDecidesByBytes(t *testing.T) {
	cases := []struct {
		name string
		head string
		kind Kind
		ok   bool
	}{
		{"png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", Image, true},
		{"jpeg", "\xff\xd8\xff\xe0\x00\x10JFIF\x00", Image, true},
		{"webp", "RIFF\x00\x00\x00\x00WEBPVP8 ", Image, true},
		{"gif", "GIF89a\x01\x00", Image, false},
		{"svg", `<svg xmlns="http://www.w3.org/2000/svg"></svg>`, Image, false},
		{"html", "<!DOCTYPE html><html></html>", Image, false},
		{"pdf", "%PDF-1.7\n", Image, false},
		{"mp4", "\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2", Video, true},
		{"mp4 as image", "\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2", Image, false},
		{"wav", "RIFF\x24\x00\x00\x00WAVEfmt ", Audio, true},
		{"mp3", "ID3\x04\x00\x00\x00\x00\x01\x00" + strings.Repeat("\x00", 64), Audio, true},
		{"flac", "fLaC\x00\x00\x00\x22", Audio, true},
		{"text", "hello", Audio, false},
	}
	for _, tc := range cases {
		if got := tc.kind.Accepts(Sniff([]byte(tc.head))); got != tc.ok {
			t.Errorf("%s: %s accepts %q (%s) = %v, want %v", tc.name, tc.kind, tc.head, Sniff([]byte(tc.head)), got, tc.ok)
		}
	}
}

func TestSignerRoundTrip(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := NewSigner("https://api.example.com", []string{"new-secret", "old-secret"})
	old := NewSigner("https://api.example.com", []string{"old-secret"})
	id := "file_" + strings.Repeat("a", 24)
	u := s.URL(id, now.Add(time.Hour))
	if ref, err := s.Parse(u, now); err != nil || ref.ID != id {
		t.Fatalf("own URL: %v %v", ref, err)
	}
	if _, err := s.Parse(old.URL(id, now.Add(time.Hour)), now); err != nil {
		t.Fatalf("a URL signed before rotation must still verify: %v", err)
	}
	if _, err := s.Parse(u, now.Add(2*time.Hour)); err != ErrExpired {
		t.Fatalf("expired: %v", err)
	}
	// Every other spelling of the signature's last character (its low bits are spare) is refused.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for _, c := range alphabet {
		if other := u[:len(u)-1] + string(c); other != u {
			if _, err := s.Parse(other, now); err != ErrNotIssued {
				t.Errorf("signature ending %q instead of %q accepted", c, u[len(u)-1:])
			}
		}
	}
	for _, bad := range []string{
		strings.Replace(u, "sig=", "sig=A", 1), strings.Replace(u, "https://api.example.com", "https://evil.example", 1),
		u + "&x=1", strings.Replace(u, id, "file_"+strings.Repeat("b", 24), 1), NewSigner("https://api.example.com", []string{"other"}).URL(id, now.Add(time.Hour)),
	} {
		if _, err := s.Parse(bad, now); err != ErrNotIssued {
			t.Errorf("%s: %v, want ErrNotIssued", bad, err)
		}
	}
}

// FuzzSignerParse: no input panics, and whatever verifies is a URL this signer produced.
func FuzzSignerParse(f *testing.F) {
	s := NewSigner("http://localhost:8080", []string{"k"})
	now := time.Unix(1_800_000_000, 0)
	f.Add(s.URL("file_abc", now.Add(time.Hour)))
	f.Add("http://localhost:8080/media/file_abc?exp=1&sig=x")
	f.Add("http://localhost:8080/media/?exp=&sig=")
	f.Fuzz(func(t *testing.T, raw string) {
		ref, err := s.Parse(raw, now)
		if err == nil && s.URL(ref.ID, ref.Expires) != raw {
			t.Fatalf("accepted %q, which the signer would write as %q", raw, s.URL(ref.ID, ref.Expires))
		}
	})
}

// FuzzParseImport: no body panics; every refusal is the client's, with a code (its status is the HTTP
// layer's: handlers' TestEveryRefusalCodeHasAStatus); every accepted request is within
// the per-kind limits and holds at least one URL.
func FuzzParseImport(f *testing.F) {
	for _, seed := range []string{`{"image_urls":["https://a.example/x.png"]}`, `{"video_urls":[1]}`, `{}`, `[`, `{"image_urls":null,"audio_urls":["x"]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, aerr := ParseImport(body)
		if aerr != nil {
			if aerr.Code == "" || aerr.Code == refusal.Internal.Code || aerr.Code == refusal.ShuttingDown.Code || aerr.Message == "" {
				t.Fatalf("bad refusal %+v", aerr)
			}
			return
		}
		n := len(r.ImageURLs) + len(r.VideoURLs) + len(r.AudioURLs)
		if n == 0 || len(r.ImageURLs) > MaxImages || len(r.VideoURLs) > MaxVideos || len(r.AudioURLs) > MaxAudios {
			t.Fatalf("accepted %d/%d/%d URLs", len(r.ImageURLs), len(r.VideoURLs), len(r.AudioURLs))
		}
	})
}
