package openai

import (
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/imagefit"
)

// Models is what each Sora model id renders through OpenAI's Videos API (docs/upstreams.md#openai-models,
// with its sources and the date they were read): the spec's VideoSeconds ("4", "8", "12") and VideoSize
// enums (openapi.yaml, kept in testdata/), of which 1024x1792 and 1792x1024 are sora-2-pro's only. The
// first frame (input_reference) must have the video's exact size ("Inpaint image must match the
// requested width and height"), so the adapter crops it to that size before it is sent. Sora always
// renders sound and takes no seed.
var Models = upstream.NewTable(
	sora("sora-2", false), sora("sora-2-2025-10-06", false), sora("sora-2-2025-12-08", false),
	sora("sora-2-pro", true), sora("sora-2-pro-2025-10-06", true),
)

// firstFrame: JPEG, PNG or WebP (the spec's input_reference types), conformed to the video's size.
// The pixel bound is ours, not OpenAI's: what the crop will decode (imagefit.MaxPixels).
var firstFrame = upstream.InputLimit{Max: 1, Formats: []string{"image/jpeg", "image/png", "image/webp"}, Conform: upstream.ConformCrop,
	MaxPixels: imagefit.MaxPixels}

func sora(id string, pro bool) upstream.ModelRow {
	sizes := []string{"720p 16:9 1280x720", "720p 9:16 720x1280"}
	if pro {
		// Not a catalog size: sold only through a route's size_map.
		sizes = append(sizes, "1024p 16:9 1792x1024", "1024p 9:16 1024x1792")
	}
	return upstream.ModelRow{ID: id, Seconds: allowedSeconds, Sizes: upstream.SizeTable(sizes...), ExactSizes: true,
		Inputs: map[string]upstream.InputLimit{upstream.InputFirstFrame: firstFrame}, Audio: upstream.AudioAlways}
}
