package videos_test

import (
	"testing"

	"videogen/internal/domain/media"
	"videogen/internal/domain/videos"
	"videogen/models"
)

// TestHashIsStable: Idempotency-Key rows store this hash for 24 hours, so a release that changed it would
// answer idempotency_conflict to a client retrying a create across the deploy. The value is the one the
// first release computed for this body.
func TestHashIsStable(t *testing.T) {
	r, aerr := videos.ParseCreate([]byte(`{"model":"videogen-2.0-720p","prompt":"a boat","seconds":"6","aspect_ratio":"9:16","generate_audio":true}`), videos.MediaPolicy{})
	if aerr != nil {
		t.Fatal(aerr)
	}
	if got, want := r.Hash(), "7ac1b00d35e9d859bd33c203d775ef6ef2edf1b0712b210d811251157d0ad72f"; got != want {
		t.Fatalf("hash %s, want %s", got, want)
	}
}

// TestHashCountsCarriedFilesByBytes: a file the request carried in its own body (SHA256 set) hashes by
// its bytes, whatever id it was stored under, so a retry is the same request; a file by URL still hashes
// by id; and a remix never hashes as the create of the same values.
func TestHashCountsCarriedFilesByBytes(t *testing.T) {
	ref := func(id, sha string) media.FieldRef {
		return media.FieldRef{Field: "start_image_url", Param: "input_reference", Kind: media.Image, ID: id, SHA256: sha}
	}
	req := func(r media.FieldRef, remixOf string) *videos.CreateRequest {
		return &videos.CreateRequest{VideoRequest: models.VideoRequest{Model: "videogen-2.0-720p", Prompt: "p", Seconds: 4},
			Media: []media.FieldRef{r}, RemixedFromVideoID: remixOf}
	}
	for _, c := range []struct {
		name string
		a, b *videos.CreateRequest
		same bool
	}{
		{"same bytes, new id", req(ref("file_a", "abc"), ""), req(ref("file_b", "abc"), ""), true},
		{"other bytes", req(ref("file_a", "abc"), ""), req(ref("file_a", "abd"), ""), false},
		{"by URL: by id", req(ref("file_a", ""), ""), req(ref("file_b", ""), ""), false},
		{"a remix is not a create", req(ref("file_a", "abc"), "video_x"), req(ref("file_a", "abc"), ""), false},
		{"remixes of two videos", req(ref("file_a", "abc"), "video_x"), req(ref("file_a", "abc"), "video_y"), false},
	} {
		if got := c.a.Hash() == c.b.Hash(); got != c.same {
			t.Errorf("%s: same hash %v, want %v", c.name, got, c.same)
		}
	}
}
