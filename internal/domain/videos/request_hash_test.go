package videos_test

import (
	"testing"

	"videogen/internal/domain/videos"
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
