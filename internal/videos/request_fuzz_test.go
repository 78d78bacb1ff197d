package videos

import (
	"strings"
	"testing"
	"unicode/utf8"

	"videogen/internal/catalog"
)

// FuzzParseCreate feeds arbitrary bodies to the decoder and validator: it must never panic, every
// refusal must be a 4xx with a code, and every accepted request must satisfy every limit.
func FuzzParseCreate(f *testing.F) {
	seeds := []string{
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
	policy := MediaPolicy{PublicBaseURL: "http://localhost:8080"}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := ParseCreate(body, policy)
		if aerr != nil {
			if aerr.Status < 400 || aerr.Status >= 500 || aerr.Code == "" || aerr.Message == "" {
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
		for _, u := range append(append(append([]string{}, req.ImageURLs...), req.VideoURLs...), req.AudioURLs...) {
			if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, policy.PublicBaseURL+"/") {
				t.Fatalf("accepted media URL %q", u)
			}
		}
		// The same body parses the same way every time (the idempotency hash depends on it).
		again, _ := ParseCreate(body, policy)
		if again == nil || again.Hash() != req.Hash() {
			t.Fatal("parse is not deterministic")
		}
	})
}
