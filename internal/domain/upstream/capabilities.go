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
	// AudioAlways: the model renders sound whatever generate_audio says (Sora, Veo 3); the video object
	// then echoes generate_audio true.
	AudioAlways bool
	// Seed: the provider takes a seed; elsewhere a customer's seed is not sent, and not echoed.
	Seed bool
	// Limits bounds each input (count, format, pixels, duration, bytes), from the model's row.
	Limits map[string]InputLimit
	// Rules couple the request's fields (Veo: a last frame ⇒ 8 s).
	Rules []RouteRule
	// Notes are the model's resolution-bound rules already applied to the route, in words ("1080p: 8 s
	// only"), for GET /v1/models and /pricing.
	Notes []string
	// Rendered maps a sold size to the pixels the model renders for it, where they differ (Seedance 1.0
	// renders 1920x1088 for 1080p 16:9), so a task's rendered size is compared with what was expected.
	Rendered map[string]string
}

// RouteRule is a Rule resolved for one route: its ratios turned into the alias's sizes.
type RouteRule struct {
	Words    string
	IfInputs []string
	Seconds  []int
	Sizes    []string // nil: any size
	Without  []string
	Needs    []string
}

// Expected is the size the route's model renders when size is sold: the mapped size's, else the
// model's own pixels for it.
func (c Capabilities) Expected(size string) string {
	sent := c.SendSize(size)
	if r, ok := c.Rendered[sent]; ok {
		return r
	}
	return sent
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

// Renders reports whether the route can render req: its seconds, size, inputs and sound, the model's
// rules and every input's limits.
func (c Capabilities) Renders(req models.VideoRequest) bool {
	if !c.RendersSeconds(req.Seconds) || !c.RendersSize(req.Size) || (req.GenerateAudio && !c.Audio) {
		return false
	}
	for _, in := range RequestInputs(req) {
		if !c.Takes(in) {
			return false
		}
	}
	return c.RuleRefusal(req) == nil && c.LimitRefusal(req) == nil
}

// RuleRefusal is the first of the route's rules req breaks, or nil.
func (c Capabilities) RuleRefusal(req models.VideoRequest) *UnsupportedError {
	ins := RequestInputs(req)
	for _, r := range c.Rules {
		trigger := ""
		for _, in := range r.IfInputs {
			if slices.Contains(ins, in) {
				trigger = in
				break
			}
		}
		if trigger == "" {
			continue
		}
		for _, w := range r.Without {
			if slices.Contains(ins, w) {
				return &UnsupportedError{Param: inputParam[trigger],
					Message: fmt.Sprintf("This model cannot take %s together with %s (%s). Send one or the other.", inputWords[trigger], inputWords[w], r.Words)}
			}
		}
		if r.Needs != nil && !slices.ContainsFunc(r.Needs, func(n string) bool { return slices.Contains(ins, n) }) {
			var needs []string
			for _, n := range r.Needs {
				needs = append(needs, inputWords[n])
			}
			return &UnsupportedError{Param: inputParam[trigger],
				Message: fmt.Sprintf("This model needs %s with %s (%s).", orList(needs), inputWords[trigger], r.Words)}
		}
		if r.Seconds != nil && !slices.Contains(r.Seconds, req.Seconds) {
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: "seconds",
				Message: fmt.Sprintf("With %s this model renders %s seconds only (%s); %d seconds cannot be rendered. Send seconds %s, or leave %s out.",
					inputWords[trigger], orList(intStrings(slices.Clone(r.Seconds))), r.Words, req.Seconds, orList(intStrings(slices.Clone(r.Seconds))), inputParam[trigger])}
		}
		if r.Sizes != nil && !slices.Contains(r.Sizes, req.Size) {
			accepted := "no size of this model"
			if len(r.Sizes) > 0 {
				accepted = orList(r.Sizes)
			}
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: "size",
				Message: fmt.Sprintf("With %s this model renders %s only (%s); %s cannot be rendered. Send one of those sizes, or leave %s out.",
					inputWords[trigger], accepted, r.Words, req.Size, inputParam[trigger])}
		}
	}
	return nil
}

// LimitRefusal is the first input of req outside the route's limits for it, or nil. A limit is checked
// against what probing found of the file (TaskInputs.Media); what was not found is not held against it.
func (c Capabilities) LimitRefusal(req models.VideoRequest) *UnsupportedError {
	count := map[string]int{InputReferenceImages: len(req.ImageURLs), InputReferenceVideos: len(req.VideoURLs), InputReferenceAudio: len(req.AudioURLs)}
	for _, in := range Inputs {
		if lim, ok := c.Limits[in]; ok && lim.Max > 0 && count[in] > lim.Max {
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: inputParam[in],
				Message: fmt.Sprintf("This model takes at most %d %s; %d were sent. Send fewer.", lim.Max, inputWords[in], count[in])}
		}
	}
	totalMs := map[string]int64{}
	for _, p := range req.Media {
		in := inputOfField[p.Field]
		lim, ok := c.Limits[in]
		if !ok {
			continue
		}
		param := p.Field
		if p.Field == "image_urls" || p.Field == "video_urls" || p.Field == "audio_urls" {
			param = fmt.Sprintf("%s[%d]", p.Field, p.Position)
		}
		if err := lim.refusal(param, inputWords[in], p); err != nil {
			return err
		}
		totalMs[in] += p.DurationMs
		if lim.MaxTotalMs > 0 && totalMs[in] > lim.MaxTotalMs {
			return &UnsupportedError{Code: CodeUnsupportedValue, Param: p.Field,
				Message: fmt.Sprintf("This model takes %s of at most %s together; these add up to %s. Send shorter or fewer files.", inputWords[in], seconds(lim.MaxTotalMs), seconds(totalMs[in]))}
		}
	}
	return nil
}

// inputOfField is the input each request field carries.
var inputOfField = map[string]string{
	"start_image_url": InputFirstFrame, "end_image_url": InputLastFrame, "image_urls": InputReferenceImages,
	"video_urls": InputReferenceVideos, "audio_urls": InputReferenceAudio,
}

func (l InputLimit) refusal(param, words string, p models.MediaProbe) *UnsupportedError {
	no := func(format string, args ...any) *UnsupportedError {
		return &UnsupportedError{Code: CodeUnsupportedValue, Param: param, Message: fmt.Sprintf(format, args...)}
	}
	if l.Formats != nil && !slices.Contains(l.Formats, p.ContentType) {
		return no("%s is %s; this model takes %s as %s only. Convert the file and upload it again.", param, p.ContentType, words, orList(l.Formats))
	}
	if l.MaxBytes > 0 && p.Bytes > l.MaxBytes {
		return no("%s is %d bytes; this model takes %s of at most %d bytes.", param, p.Bytes, words, l.MaxBytes)
	}
	if l.Conform != "" && l.MaxPixels > 0 && int64(p.Width)*int64(p.Height) > l.MaxPixels {
		return no("%s is %dx%d (%d pixels); %s of at most %d pixels are taken. Scale the image down and upload it again.", param, p.Width, p.Height, int64(p.Width)*int64(p.Height), words, l.MaxPixels)
	}
	if l.Conform == "" && p.Width > 0 && p.Height > 0 {
		w, h := p.Width, p.Height
		side := fmt.Sprintf("%dx%d", w, h)
		switch {
		case l.MinSide > 0 && min(w, h) < l.MinSide, l.MaxSide > 0 && max(w, h) > l.MaxSide:
			return no("%s is %s; this model takes %s of %s pixels a side.", param, side, words, between(l.MinSide, l.MaxSide, strconv.Itoa))
		case l.MinRatio > 0 && float64(w)/float64(h) < l.MinRatio, l.MaxRatio > 0 && float64(w)/float64(h) > l.MaxRatio:
			return no("%s is %s; this model takes %s whose width/height is %s.", param, side, words, between(l.MinRatio, l.MaxRatio, func(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }))
		case l.MinPixels > 0 && int64(w)*int64(h) < l.MinPixels, l.MaxPixels > 0 && int64(w)*int64(h) > l.MaxPixels:
			return no("%s is %s (%d pixels); this model takes %s of %s pixels (width × height). Scale the file and upload it again.", param, side, int64(w)*int64(h), words, between(l.MinPixels, l.MaxPixels, func(n int64) string { return strconv.FormatInt(n, 10) }))
		}
	}
	if p.DurationMs > 0 {
		if (l.MinMs > 0 && p.DurationMs < l.MinMs) || (l.MaxMs > 0 && p.DurationMs > l.MaxMs) {
			return no("%s lasts %s; this model takes %s of %s.", param, seconds(p.DurationMs), words, between(l.MinMs, l.MaxMs, seconds))
		}
	}
	return nil
}

// between words a range whose either end may be open (zero): "2 s to 15 s", "at least 300", "at most
// 6000".
func between[N int | int64 | float64](lo, hi N, word func(N) string) string {
	switch {
	case lo > 0 && hi > 0:
		return word(lo) + " to " + word(hi)
	case lo > 0:
		return "at least " + word(lo)
	default:
		return "at most " + word(hi)
	}
}

// seconds words a duration in ms: "15 s", "2.5 s".
func seconds(ms int64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'f', -1, 64) + " s"
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
		} else {
			left = kept
		}
	}
	// The model's rules, then each input's limits: the first route's refusal speaks for all (they
	// differ only where an alias has routes on several models).
	if kept := narrow(func(c Capabilities) bool { return c.RuleRefusal(req) == nil }); len(kept) == 0 {
		return left[0].RuleRefusal(req)
	} else {
		left = kept
	}
	if kept := narrow(func(c Capabilities) bool { return c.LimitRefusal(req) == nil }); len(kept) == 0 {
		return left[0].LimitRefusal(req)
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
