package videos

import (
	"testing"
	"time"
	"unicode/utf8"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/media"
	"videogen/internal/refusal"
)

// FuzzParseCreate feeds arbitrary bodies to the decoder and validator: it must never panic, every
// refusal must be a 4xx with a code, and every accepted request must satisfy every limit.
func FuzzParseCreate(f *testing.F) {
	signer := media.NewSigner("http://localhost:8080", []string{"fuzz-secret"})
	now := time.Unix(1_800_000_000, 0)
	own := signer.URL("file_abcdefghijklmnopqrstuvwx", now.Add(time.Hour))
	expired := signer.URL("file_abcdefghijklmnopqrstuvwx", now.Add(-time.Hour))
	seeds := []string{
		`{"model":"videogen-2.0-720p","prompt":"x","image_urls":["` + own + `"],"start_image_url":"` + own + `"}`,
		`{"model":"videogen-2.0-720p","prompt":"x","video_urls":["` + expired + `"]}`,
		`{"model":"videogen-2.0-720p","prompt":"a fox"}`,
		`{"model":"videogen-2.0-1080p","prompt":"x","seconds":"15","duration":15,"aspect_ratio":"21:9"}`,
		`{"model":"videogen-2.0-mini-480p","prompt":"x","size":"496x864","image_urls":["https://a/b"],"start_image_url":"https://a/s"}`,
		`{"model":"videogen-2.0-720p","prompt":"x","seconds":8.5}`,
		`{"model":"videogen-2.0-720p","prompt":"\u00e9\u00e9","video_urls":[1,2]}`,
		`{"model":null}`, `[]`, `"x"`, ``, `{`, `{"a":1}{}`, `{"prompt":{"x":1}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	policy := MediaPolicy{Signer: signer, Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := ParseCreate(body, policy)
		if aerr != nil {
			if aerr.Code == "" || aerr.Code == refusal.Internal.Code || aerr.Code == refusal.ShuttingDown.Code || aerr.Message == "" {
				t.Fatalf("bad refusal %+v", aerr)
			}
			if req != nil {
				t.Fatal("refusal with a request")
			}
			return
		}
		m, ok := catalog.Lookup(req.Model)
		if !ok {
			t.Fatalf("accepted unknown model %q", req.Model)
		}
		if n := utf8.RuneCountInString(req.Prompt); n < 1 || n > MaxPromptChars {
			t.Fatalf("accepted prompt of %d characters", n)
		}
		if req.Seconds < MinSeconds || req.Seconds > MaxSeconds {
			t.Fatalf("accepted %d seconds", req.Seconds)
		}
		if size, _ := m.Size(req.AspectRatio); size != req.Size || size == "" {
			t.Fatalf("size %q does not match %s %s", req.Size, req.Model, req.AspectRatio)
		}
		images := len(req.ImageURLs)
		if req.StartImageURL != "" {
			images++
		}
		if req.EndImageURL != "" {
			images++
		}
		if images > MaxImages || len(req.VideoURLs) > MaxVideos || len(req.AudioURLs) > MaxAudios {
			t.Fatalf("accepted %d images, %d videos, %d audios", images, len(req.VideoURLs), len(req.AudioURLs))
		}
		all := append(append(append([]string{}, req.ImageURLs...), req.VideoURLs...), req.AudioURLs...)
		if req.StartImageURL != "" {
			all = append(all, req.StartImageURL)
		}
		if req.EndImageURL != "" {
			all = append(all, req.EndImageURL)
		}
		if len(req.Media) != len(all) {
			t.Fatalf("%d media URLs but %d verified files", len(all), len(req.Media))
		}
		for _, u := range all {
			if _, err := signer.Parse(u, now); err != nil {
				t.Fatalf("accepted media URL %q: %v", u, err)
			}
		}
		// The same body parses the same way every time (the idempotency hash depends on it).
		again, _ := ParseCreate(body, policy)
		if again == nil || again.Hash() != req.Hash() {
			t.Fatal("parse is not deterministic")
		}
	})
}
