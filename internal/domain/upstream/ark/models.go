package ark

import "videogen/internal/domain/upstream"

// Models is what each Seedance model id renders on Ark, by the id each region lists it under
// (docs/upstreams.md#ark-models, with every source and the date it was read). A route's capabilities
// come from its model's row; an operator may only narrow them.
var Models = upstream.NewTable(rows()...)

// Seedance 1.0 renders its own pixels for each resolution and ratio (Volcengine, 创建视频生成任务 API,
// 82379/1520757, as scraped in Hajimi-Commune/VolcanoArkDocs, read 2026-11-29).
var sizes10 = upstream.SizeTable(
	"480p 21:9 960x416", "480p 16:9 864x480", "480p 4:3 736x544", "480p 1:1 640x640", "480p 3:4 544x736", "480p 9:16 480x864",
	"720p 21:9 1504x640", "720p 16:9 1248x704", "720p 4:3 1120x832", "720p 1:1 960x960", "720p 3:4 832x1120", "720p 9:16 704x1248",
	"1080p 21:9 2176x928", "1080p 16:9 1920x1088", "1080p 4:3 1664x1248", "1080p 1:1 1440x1440", "1080p 3:4 1248x1664", "1080p 9:16 1088x1920",
)

// Seedance 1.5 pro and 2.0 render the catalog's sizes (docs/design.md §4), which were taken from them.
var sizes20 = upstream.SizeTable(
	"480p 21:9 992x432", "480p 16:9 864x496", "480p 4:3 752x560", "480p 1:1 640x640", "480p 3:4 560x752", "480p 9:16 496x864",
	"720p 21:9 1470x630", "720p 16:9 1280x720", "720p 4:3 1112x834", "720p 1:1 960x960", "720p 3:4 834x1112", "720p 9:16 720x1280",
	"1080p 21:9 2206x946", "1080p 16:9 1920x1080", "1080p 4:3 1664x1248", "1080p 1:1 1440x1440", "1080p 3:4 1248x1664", "1080p 9:16 1080x1920",
)

// only keeps the resolutions listed.
func only(sizes map[string]map[string]string, resolutions ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, r := range resolutions {
		out[r] = sizes[r]
	}
	return out
}

// Images Ark takes as any frame or reference: JPEG, PNG or WebP of our formats (Ark also takes BMP,
// TIFF, GIF), 300 to 6000 pixels a side, width/height from 0.4 to 2.5, under 30 MB.
var image = upstream.InputLimit{MinSide: 300, MaxSide: 6000, MinRatio: 0.4, MaxRatio: 2.5, MaxBytes: 30_000_000}

func images(max int) upstream.InputLimit { l := image; l.Max = max; return l }

// Seedance 2.0's reference videos: MP4 or MOV, at most 3, each 2 to 15 s and 15 s together, of
// 409,600 to 927,408 pixels (640x640 to 834x1112), under 50 MB; reference audio: WAV or MP3, at most 3,
// each 2 to 15 s and 15 s together, under 15 MB.
var (
	referenceVideos = upstream.InputLimit{Max: 3, Formats: []string{"video/mp4", "video/quicktime"}, MinSide: 300, MaxSide: 6000,
		MinRatio: 0.4, MaxRatio: 2.5, MinPixels: 409_600, MaxPixels: 927_408, MinMs: 2000, MaxMs: 15000, MaxTotalMs: 15000, MaxBytes: 50_000_000}
	referenceAudio = upstream.InputLimit{Max: 3, Formats: []string{"audio/wav", "audio/mpeg"}, MinMs: 2000, MaxMs: 15000, MaxTotalMs: 15000,
		MaxBytes: 15_000_000}
)

// The rules every Seedance model with frames shares: a first or last frame fixes the video's ends, so
// it cannot come with reference media; a last frame needs a first; reference audio needs a reference
// image or video.
var (
	framesOrReferences = upstream.Rule{Words: "first or last frame, or reference media: not both",
		IfInputs: []string{upstream.InputFirstFrame, upstream.InputLastFrame},
		Without:  []string{upstream.InputReferenceImages, upstream.InputReferenceVideos, upstream.InputReferenceAudio}}
	lastNeedsFirst = upstream.Rule{Words: "a last frame needs a first frame",
		IfInputs: []string{upstream.InputLastFrame}, Needs: []string{upstream.InputFirstFrame}}
	audioNeedsMedia = upstream.Rule{Words: "reference audio needs a reference image or video",
		IfInputs: []string{upstream.InputReferenceAudio}, Needs: []string{upstream.InputReferenceImages, upstream.InputReferenceVideos}}
)

// both lists a row under its BytePlus ModelArk id and its Volcengine Ark id.
func both(byteplus, volcengine string, row upstream.ModelRow) []upstream.ModelRow {
	a, b := row, row
	a.ID, b.ID = byteplus, volcengine
	if volcengine == "" {
		return []upstream.ModelRow{a}
	}
	return []upstream.ModelRow{a, b}
}

func rows() []upstream.ModelRow {
	all := map[string]upstream.InputLimit{
		upstream.InputFirstFrame: images(1), upstream.InputLastFrame: images(1), upstream.InputReferenceImages: images(9),
		upstream.InputReferenceVideos: referenceVideos, upstream.InputReferenceAudio: referenceAudio,
	}
	frames := map[string]upstream.InputLimit{upstream.InputFirstFrame: images(1), upstream.InputLastFrame: images(1)}
	seedance20 := upstream.ModelRow{Seconds: upstream.SecondsFrom(4, 15), Sizes: sizes20, Inputs: all, Audio: upstream.AudioOnRequest, Seed: true,
		Rules: []upstream.Rule{framesOrReferences, lastNeedsFirst, audioNeedsMedia}}
	seedance20fast := seedance20
	seedance20fast.Sizes = only(sizes20, "480p", "720p")
	pro15 := upstream.ModelRow{Seconds: upstream.SecondsFrom(4, 12), Sizes: sizes20, Inputs: frames, Audio: upstream.AudioOnRequest, Seed: true,
		Rules: []upstream.Rule{lastNeedsFirst}}
	pro10 := upstream.ModelRow{Seconds: upstream.SecondsFrom(2, 12), Sizes: sizes10, Inputs: frames, Audio: upstream.AudioNone, Seed: true,
		Rules: []upstream.Rule{lastNeedsFirst}}
	pro10fast := pro10
	pro10fast.Inputs = map[string]upstream.InputLimit{upstream.InputFirstFrame: images(1)}
	pro10fast.Rules = nil
	liteT2V := upstream.ModelRow{Seconds: upstream.SecondsFrom(2, 12), Sizes: sizes10, Inputs: map[string]upstream.InputLimit{}, Audio: upstream.AudioNone, Seed: true}
	liteI2V := upstream.ModelRow{Seconds: upstream.SecondsFrom(2, 12), Sizes: sizes10, Audio: upstream.AudioNone, Seed: true,
		Inputs: map[string]upstream.InputLimit{upstream.InputFirstFrame: images(1), upstream.InputLastFrame: images(1), upstream.InputReferenceImages: images(4)},
		Rules: []upstream.Rule{framesOrReferences, lastNeedsFirst,
			{Words: "reference images: 480p or 720p only", IfInputs: []string{upstream.InputReferenceImages}, Resolutions: []string{"480p", "720p"}}}}

	var out []upstream.ModelRow
	out = append(out, both("dreamina-seedance-2-0-260128", "doubao-seedance-2-0-260128", seedance20)...)
	out = append(out, both("dreamina-seedance-2-0-fast-260128", "doubao-seedance-2-0-fast-260128", seedance20fast)...)
	out = append(out, both("seedance-1-5-pro-251215", "doubao-seedance-1-5-pro-251215", pro15)...)
	out = append(out, both("seedance-1-0-pro-250528", "doubao-seedance-1-0-pro-250528", pro10)...)
	out = append(out, both("seedance-1-0-pro-fast-251015", "doubao-seedance-1-0-pro-fast-251015", pro10fast)...)
	out = append(out, both("seedance-1-0-lite-t2v-250428", "doubao-seedance-1-0-lite-t2v-250428", liteT2V)...)
	out = append(out, both("seedance-1-0-lite-i2v-250428", "doubao-seedance-1-0-lite-i2v-250428", liteI2V)...)
	return out
}
