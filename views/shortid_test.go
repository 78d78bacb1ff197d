package views

import "testing"

func TestShortID(t *testing.T) {
	cases := []struct{ in, id, path string }{
		{"req_0Ab3dE5fGhijklmnopqrst", "req_…opqrst", ""},
		{"video_z6bxpfyJsVIzq24Tm3LFqXLA", "video_…LFqXLA", ""},
		{"video_short", "video_short", ""},
		{"plain-without-kind-but-long", "plain-without-kind-but-long", ""},
		{"/v1/videos/video_z6bxpfyJsVIzq24Tm3LFqXLA/content", "", "/v1/videos/video_…LFqXLA/content"},
		{"/v1/videos", "", "/v1/videos"},
		{"/uploads/v1/files", "", "/uploads/v1/files"},
		{"/v1/webhook_endpoints/we_JlqUaqf1M0be0Ier0ti7ET8V/rotate_secret", "", "/v1/webhook_endpoints/we_…i7ET8V/rotate_secret"},
	}
	for _, c := range cases {
		if c.id != "" {
			if got := ShortID(c.in); got != c.id {
				t.Errorf("ShortID(%q) = %q, want %q", c.in, got, c.id)
			}
		}
		if c.path != "" {
			if got := ShortPath(c.in); got != c.path {
				t.Errorf("ShortPath(%q) = %q, want %q", c.in, got, c.path)
			}
		}
	}
}
