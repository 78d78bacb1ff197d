package upstream

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"videogen/models"
)

// Media inputs a route may take, as the upstreams file names them.
const (
	InputFirstFrame      = "first_frame"
	InputLastFrame       = "last_frame"
	InputReferenceImages = "reference_images"
	InputReferenceVideos = "reference_videos"
	InputReferenceAudio  = "reference_audio"
)

// Inputs lists every input name, in the order the API's fields are checked.
var Inputs = []string{InputFirstFrame, InputLastFrame, InputReferenceImages, InputReferenceVideos, InputReferenceAudio}

// inputParam is the request field that carries each input.
var inputParam = map[string]string{
	InputFirstFrame:      "start_image_url",
	InputLastFrame:       "end_image_url",
	InputReferenceImages: "image_urls",
	InputReferenceVideos: "video_urls",
	InputReferenceAudio:  "audio_urls",
}

// inputWords is how a refusal names each input to a customer.
var inputWords = map[string]string{
	InputFirstFrame:      "a first frame (start_image_url)",
	InputLastFrame:       "a last frame (end_image_url)",
	InputReferenceImages: "reference images (image_urls)",
	InputReferenceVideos: "reference videos (video_urls)",
	InputReferenceAudio:  "reference audio (audio_urls)",
}

// Capabilities is what one route's upstream model can render. A create that no usable route of its
// alias can render is refused before anything is reserved, and routing picks only routes that can
// render the task (docs/upstreams.md#capabilities).
type Capabilities struct {
	Seconds []int    // durations it renders
	Sizes   []string // "WxH" sizes it renders
	Inputs  []string // media inputs it takes (the Input… names)
	Audio   bool     // whether it can generate sound
	// SizeMap sells a size the model does not render as one it does (sold → sent), where the operator
	// declared it; the sold size is then accepted too, and the rendered size is noted on the task.
	SizeMap map[string]string
}

// RequestInputs lists the inputs a request carries.
func RequestInputs(req models.VideoRequest) []string {
	var out []string
	if req.StartImageURL != "" {
		out = append(out, InputFirstFrame)
	}
	if req.EndImageURL != "" {
		out = append(out, InputLastFrame)
	}
	if len(req.ImageURLs) > 0 {
		out = append(out, InputReferenceImages)
	}
	if len(req.VideoURLs) > 0 {
		out = append(out, InputReferenceVideos)
	}
	if len(req.AudioURLs) > 0 {
		out = append(out, InputReferenceAudio)
	}
	return out
}

// RendersSeconds, RendersSize, Takes and the audio field are the four questions a request asks of a
// route, asked in this order so that a refusal names the first field no route accepts.

// RendersSeconds reports whether the route renders videos of n seconds.
func (c Capabilities) RendersSeconds(n int) bool { return slices.Contains(c.Seconds, n) }

// RendersSize reports whether the route renders size, itself or through its size map.
func (c Capabilities) RendersSize(size string) bool {
	if _, ok := c.SizeMap[size]; ok {
		return true
	}
	return slices.Contains(c.Sizes, size)
}

// SendSize is the size to ask the provider for when size is sold.
func (c Capabilities) SendSize(size string) string {
	if s, ok := c.SizeMap[size]; ok {
		return s
	}
	return size
}

// Takes reports whether the route takes the input.
func (c Capabilities) Takes(input string) bool { return slices.Contains(c.Inputs, input) }

// Renders reports whether the route can render req.
func (c Capabilities) Renders(req models.VideoRequest) bool {
	if !c.RendersSeconds(req.Seconds) || !c.RendersSize(req.Size) || (req.GenerateAudio && !c.Audio) {
		return false
	}
	for _, in := range RequestInputs(req) {
		if !c.Takes(in) {
			return false
		}
	}
	return true
}

// SellableSizes is the part of sizes (an alias's sizes, as the catalog gives them) the route renders.
func (c Capabilities) SellableSizes(sizes []string) []string {
	var out []string
	for _, s := range sizes {
		if c.RendersSize(s) {
			out = append(out, s)
		}
	}
	return out
}

// Refusal says why none of caps (the usable routes of one alias) renders req, naming the first field
// in the order seconds, size, inputs, generate_audio that none of the routes still in question accepts,
// and what they do accept. It returns nil when some route renders req.
func Refusal(caps []Capabilities, req models.VideoRequest) *UnsupportedError {
	left := caps
	narrow := func(ok func(Capabilities) bool) (kept []Capabilities) {
		for _, c := range left {
			if ok(c) {
				kept = append(kept, c)
			}
		}
		return kept
	}
	if kept := narrow(func(c Capabilities) bool { return c.RendersSeconds(req.Seconds) }); len(kept) == 0 {
		var secs []int
		for _, c := range left {
			secs = append(secs, c.Seconds...)
		}
		return &UnsupportedError{Code: CodeUnsupportedValue, Param: "seconds",
			Message: fmt.Sprintf("This model renders %s seconds; %d seconds cannot be rendered. Send one of those values in seconds.", orList(intStrings(secs)), req.Seconds)}
	} else {
		left = kept
	}
	if kept := narrow(func(c Capabilities) bool { return c.RendersSize(req.Size) }); len(kept) == 0 {
		var sizes []string
		for _, c := range left {
			sizes = append(sizes, c.Sizes...)
			for s := range c.SizeMap {
				sizes = append(sizes, s)
			}
		}
		return &UnsupportedError{Code: CodeUnsupportedValue, Param: "size",
			Message: fmt.Sprintf("This model renders %s at %d seconds; %s cannot be rendered. Send one of those sizes, or the aspect_ratio of one.", orList(uniq(sizes)), req.Seconds, req.Size)}
	} else {
		left = kept
	}
	for _, in := range RequestInputs(req) {
		if kept := narrow(func(c Capabilities) bool { return c.Takes(in) }); len(kept) == 0 {
			var takes []string
			for _, c := range left {
				for _, t := range c.Inputs {
					takes = append(takes, inputWords[t])
				}
			}
			accepted := "no media inputs"
			if t := uniq(takes); len(t) > 0 {
				accepted = andList(t)
			}
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: inputParam[in],
				Message: fmt.Sprintf("This model cannot take %s with this request; it takes %s. Leave %s out.", inputWords[in], accepted, inputParam[in])}
		} else {
			left = kept
		}
	}
	if req.GenerateAudio {
		if kept := narrow(func(c Capabilities) bool { return c.Audio }); len(kept) == 0 {
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: "generate_audio",
				Message: "This model renders silent video only. Set generate_audio to false."}
		}
	}
	return nil
}

// CodeUnsupportedValue is the error code of a request that no route of its model can render.
const CodeUnsupportedValue = "unsupported_value"

func intStrings(xs []int) []string {
	sort.Ints(xs)
	xs = slices.Compact(xs)
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = strconv.Itoa(x)
	}
	return out
}

// uniq sorts xs and drops repeats.
func uniq(xs []string) []string {
	out := slices.Clone(xs)
	sort.Strings(out)
	return slices.Compact(out)
}

func orList(xs []string) string  { return joinList(xs, "or") }
func andList(xs []string) string { return joinList(xs, "and") }

func joinList(xs []string, last string) string {
	switch len(xs) {
	case 0:
		return ""
	case 1:
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " " + last + " " + xs[len(xs)-1]
}
