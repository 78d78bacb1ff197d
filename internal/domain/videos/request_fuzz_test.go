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
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":{"image_url":"` + own + `"}}`,
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":{"image_url":"` + own + `"},"start_image_url":"` + own + `"}`,
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":{"file_id":"file-1"}}`,
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":{"image_url":"data:image/png;base64,AAAA"}}`,
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":"` + own + `"}`,
		`{"model":"videogen-2.0-720p","prompt":"x","input_reference":{}}`,
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

// FuzzParseRemix: a remix body is refused with a 4xx code or gives a prompt within the create's limits,
// never a panic.
func FuzzParseRemix(f *testing.F) {
	for _, s := range []string{`{"prompt":"again, at night"}`, `{"prompt":""}`, `{"prompt":"x","model":"y"}`, `{}`, `[]`, ``, `{"prompt":1}`, `{"prompt":"a\u0000b"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		prompt, aerr := ParseRemix(body)
		if aerr != nil {
			if aerr.Code == "" || aerr.Message == "" || prompt != "" {
				t.Fatalf("bad refusal %+v (prompt %q)", aerr, prompt)
			}
			return
		}
		if n := utf8.RuneCountInString(prompt); n < 1 || n > MaxPromptChars {
			t.Fatalf("accepted a prompt of %d characters", n)
		}
	})
}

// FuzzParseCreateForm: any multipart text fields (names included: input_reference[...] is read as an
// object's members) are refused with a code or accepted within every limit, deterministically.
func FuzzParseCreateForm(f *testing.F) {
	signer := media.NewSigner("http://localhost:8080", []string{"fuzz-secret"})
	now := time.Unix(1_800_000_000, 0)
	own := signer.URL("file_abcdefghijklmnopqrstuvwx", now.Add(time.Hour))
	f.Add("input_reference[image_url]", own, "seconds", "8")
	f.Add("input_reference[file_id]", "file-1", "input_reference[image_url]", own)
	f.Add("input_reference[]", own, "input_reference", own)
	f.Add("input_reference[image_url]", own, "start_image_url", own)
	f.Add("input_reference[[x]]", own, "image_urls[]", own)
	policy := MediaPolicy{Signer: signer, Now: func() time.Time { return now }}
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		form := []FormValue{{"model", "videogen-2.0-720p"}, {"prompt", "a fox"}, {n1, v1}, {n2, v2}}
		req, aerr := ParseCreateForm(form, nil, policy)
		if aerr != nil {
			if aerr.Code == "" || aerr.Message == "" || req != nil {
				t.Fatalf("bad refusal %+v", aerr)
			}
			return
		}
		if req.StartImageURL != "" {
			if _, err := signer.Parse(req.StartImageURL, now); err != nil {
				t.Fatalf("accepted first frame %q: %v", req.StartImageURL, err)
			}
		}
		again, _ := ParseCreateForm(form, nil, policy)
		if again == nil || again.Hash() != req.Hash() {
			t.Fatal("parse is not deterministic")
		}
	})
}
