package gemini

import "videogen/internal/domain/upstream"

// Models is what each Veo model id renders on the Gemini API (docs/upstreams.md#gemini-models, with its
// sources and the date they were read): the Veo page, ai.google.dev/gemini-api/docs/veo, as updated
// 2026-09-12 ("Veo API parameters", "Model features"), and its earlier wording where that was stricter.
var Models = upstream.NewTable(
	veo31("veo-3.1-generate-preview", true),
	veo31("veo-3.1-fast-generate-preview", false),
	veo31("veo-3.1-lite-generate-preview", false),
	veo30("veo-3.0-generate-001"),
	veo30("veo-3.0-fast-generate-001"),
)

// veoSizeTable is every size Veo renders that the catalog sells: 16:9 and 9:16 at 720p and 1080p (4k
// is not sold).
var veoSizeTable = upstream.SizeTable("720p 16:9 1280x720", "720p 9:16 720x1280", "1080p 16:9 1920x1080", "1080p 9:16 1080x1920")

// frame is an image Veo takes inline: JPEG, PNG or WebP of at most 20 MB (the Gemini API's inline limit,
// which the adapter enforces as it reads the image).
var frame = upstream.InputLimit{Max: 1, MaxBytes: maxImage}

// The rules of the Veo page. Its current wording asks 8 s with reference images and at 1080p; its
// earlier wording (the same page as read 2026-11-26) also asked 8 s with a last frame (interpolation)
// and 16:9 with reference images. We keep the stricter reading: a refusal after a reservation costs the
// customer a wait, a rule too many only a choice (docs/upstreams.md#gemini-models).
var (
	at1080p         = upstream.Rule{Words: "1080p: 8 s only", IfResolutions: []string{"1080p"}, Seconds: []int{8}}
	interpolation   = upstream.Rule{Words: "first + last frame: 8 s only", IfInputs: []string{upstream.InputLastFrame}, Seconds: []int{8}}
	lastNeedsFirst  = upstream.Rule{Words: "a last frame needs a first frame", IfInputs: []string{upstream.InputLastFrame}, Needs: []string{upstream.InputFirstFrame}}
	referencesAlone = upstream.Rule{Words: "first or last frame, or reference images: not both", IfInputs: []string{upstream.InputFirstFrame, upstream.InputLastFrame},
		Without: []string{upstream.InputReferenceImages}}
	referencesShape = upstream.Rule{Words: "reference images: 8 s, 16:9 only", IfInputs: []string{upstream.InputReferenceImages},
		Seconds: []int{8}, Ratios: []string{"16:9"}}
)

// veo31 is Veo 3.1 and its fast and lite variants: 4, 6 or 8 s, a first and a last frame, and — Veo
// 3.1 itself only — up to three reference images; always with sound.
func veo31(id string, references bool) upstream.ModelRow {
	row := upstream.ModelRow{ID: id, Seconds: []int{4, 6, 8}, Sizes: veoSizeTable, ExactSizes: true, Audio: upstream.AudioAlways,
		Inputs: map[string]upstream.InputLimit{upstream.InputFirstFrame: frame, upstream.InputLastFrame: frame},
		Rules:  []upstream.Rule{at1080p, lastNeedsFirst, interpolation}}
	if references {
		refs := frame
		refs.Max = 3
		row.Inputs[upstream.InputReferenceImages] = refs
		row.Rules = append(row.Rules, referencesAlone, referencesShape)
	}
	return row
}

// veo30 is Veo 3 and Veo 3 Fast (deprecated on the page): 8 s, 720p, and 1080p at 16:9 only, a first
// frame only (the page's earlier wording gave the last frame to Veo 3.1 alone); always with sound.
func veo30(id string) upstream.ModelRow {
	return upstream.ModelRow{ID: id, Seconds: []int{8}, ExactSizes: true, Audio: upstream.AudioAlways,
		Sizes:  upstream.SizeTable("720p 16:9 1280x720", "720p 9:16 720x1280", "1080p 16:9 1920x1080"),
		Inputs: map[string]upstream.InputLimit{upstream.InputFirstFrame: frame}}
}
