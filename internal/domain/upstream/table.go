package upstream

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"videogen/internal/domain/catalog"
	"videogen/models"
)

// ModelRow is one upstream model id in its provider's capability table: what the model renders and
// takes, from the provider's documentation. Each adapter package owns its table, with its sources
// (docs/upstreams.md#capabilities); a route's capabilities come from its model's row, narrowed by the
// operator's declaration in the upstreams file.
type ModelRow struct {
	ID      string
	Seconds []int
	// Sizes maps each resolution the model renders to aspect ratio → the "WxH" it renders there.
	Sizes map[string]map[string]string
	// ExactSizes: the provider is asked for a pixel size, and a catalog size is sold only where the model
	// renders exactly it (OpenAI, Gemini). Otherwise the provider is asked for a resolution and a ratio
	// (Ark) and the catalog's size of that pair is sold, whatever pixels the model renders for it.
	ExactSizes bool
	// Inputs are the media inputs the model takes, each with its own limits.
	Inputs map[string]InputLimit
	Audio  string // AudioNone, AudioOnRequest or AudioAlways
	// Seed: the provider takes a seed (and so a customer's seed is sent and echoed).
	Seed  bool
	Rules []Rule
}

// How a model renders sound.
const (
	AudioNone      = "none"       // silent video only
	AudioOnRequest = "on_request" // sound when generate_audio is true
	AudioAlways    = "always"     // sound whatever generate_audio says
)

// InputLimit is what a model takes of one input. Zero fields do not limit.
type InputLimit struct {
	Max     int      // files at most
	Formats []string // content types taken; nil: every type the API accepts for the input
	// Pixel bounds of an image or video: each side, width/height, width×height.
	MinSide, MaxSide     int
	MinRatio, MaxRatio   float64
	MinPixels, MaxPixels int64
	// Duration bounds of a video or audio file, each and all of the input's files together, in ms.
	MinMs, MaxMs, MaxTotalMs int64
	MaxBytes                 int64
	// Conform: the provider demands the video's exact size; the image is resized and centre-cropped to
	// it before it is sent (ConformCrop), so any size is taken.
	Conform string
}

// ConformCrop: resized to cover the video's size, then centre-cropped to it.
const ConformCrop = "crop"

// Rule couples a request's fields: when it carries any of IfInputs, its seconds, size and other inputs
// are bounded. Resolution-bound rules (1080p ⇒ 8 s) are applied when a route is built, since an alias
// has one resolution; Words keeps them for GET /v1/models and /pricing.
type Rule struct {
	Words         string   // as customers read it: "first + last frame: 8 s only"
	IfInputs      []string // applies when the request carries any of these inputs
	IfResolutions []string // or, with no IfInputs, to aliases of these resolutions
	Seconds       []int    // then seconds must be one of these
	Ratios        []string // then the aspect ratio must be one of these
	Resolutions   []string // then the alias's resolution must be one of these
	Without       []string // then none of these inputs may come too
	Needs         []string // then one of these inputs must come too
}

// RouteCaps is what a route on row renders when it sells alias: the row's seconds (within what the API
// sells), the alias's sizes the row renders, its inputs and sound, and its rules with their sizes and
// resolutions resolved for the alias. ok is false when the row renders none of the alias's sizes.
func RouteCaps(row ModelRow, alias string) (Capabilities, bool) {
	m, found := catalog.Lookup(alias)
	if !found {
		return Capabilities{}, false
	}
	c := Capabilities{Audio: row.Audio != AudioNone && row.Audio != "", AudioAlways: row.Audio == AudioAlways, Seed: row.Seed,
		Limits: map[string]InputLimit{}, Rendered: map[string]string{}}
	for _, s := range row.Seconds {
		if s >= MinSeconds && s <= MaxSeconds {
			c.Seconds = append(c.Seconds, s)
		}
	}
	sizeOfRatio := map[string]string{}
	for _, ratio := range catalog.Ratios {
		sold, _ := m.Size(ratio)
		if rendered, ok := row.renders(m.Resolution, ratio, sold); ok {
			c.Sizes = append(c.Sizes, sold)
			sizeOfRatio[ratio] = sold
			if rendered != sold {
				c.Rendered[sold] = rendered
			}
		}
	}
	for _, in := range Inputs {
		if lim, ok := row.Inputs[in]; ok {
			c.Inputs = append(c.Inputs, in)
			c.Limits[in] = lim
		}
	}
	for _, r := range row.Rules {
		if len(r.IfInputs) == 0 {
			// A rule of the alias's resolution bounds the route itself.
			if slices.Contains(r.IfResolutions, m.Resolution) {
				if r.Seconds != nil {
					c.Seconds = intersect(c.Seconds, r.Seconds)
				}
				c.Notes = append(c.Notes, r.Words)
			}
			continue
		}
		if r.Resolutions != nil && !slices.Contains(r.Resolutions, m.Resolution) {
			// The inputs that trigger it cannot be taken at this resolution at all.
			c.Inputs = slices.DeleteFunc(c.Inputs, func(in string) bool { return slices.Contains(r.IfInputs, in) })
			for _, in := range r.IfInputs {
				delete(c.Limits, in)
			}
			continue
		}
		rr := RouteRule{Words: r.Words, IfInputs: r.IfInputs, Seconds: r.Seconds, Without: r.Without, Needs: r.Needs}
		if r.Ratios != nil {
			rr.Sizes = []string{}
			for _, ratio := range r.Ratios {
				if s, ok := sizeOfRatio[ratio]; ok {
					rr.Sizes = append(rr.Sizes, s)
				}
			}
		}
		c.Rules = append(c.Rules, rr)
	}
	return c, len(c.Sizes) > 0
}

// renders reports whether the row renders the catalog's size sold at resolution and ratio, and the
// pixels it renders for it.
func (row ModelRow) renders(resolution, ratio, sold string) (string, bool) {
	if row.ExactSizes {
		for _, byRatio := range row.Sizes {
			for _, s := range byRatio {
				if s == sold {
					return s, true
				}
			}
		}
		return "", false
	}
	s, ok := row.Sizes[resolution][ratio]
	return s, ok
}

// RendersAnySize reports whether size is one the row renders at some resolution and ratio.
func (row ModelRow) RendersAnySize(size string) bool {
	for _, byRatio := range row.Sizes {
		for _, s := range byRatio {
			if s == size {
				return true
			}
		}
	}
	return false
}

// Words lists the row's rules as customers read them.
func (row ModelRow) Words() []string {
	out := make([]string, 0, len(row.Rules))
	for _, r := range row.Rules {
		out = append(out, r.Words)
	}
	return out
}

// The seconds the API sells (docs/api.md).
const (
	MinSeconds = 4
	MaxSeconds = 15
)

// Table is a provider's capability table: model id → row.
type Table map[string]ModelRow

// NewTable indexes rows by id, refusing a repeated id (a table is code: this is a programming error).
func NewTable(rows ...ModelRow) Table {
	t := make(Table, len(rows))
	for _, r := range rows {
		if _, dup := t[r.ID]; dup {
			panic(fmt.Sprintf("capability table: model %s listed twice", r.ID))
		}
		t[r.ID] = r
	}
	return t
}

// IDs lists the table's model ids, sorted.
func (t Table) IDs() []string {
	out := make([]string, 0, len(t))
	for id := range t {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// SizeTable builds a row's sizes from "resolution ratio WxH" triples.
func SizeTable(triples ...string) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, t := range triples {
		f := strings.Fields(t)
		if len(f) != 3 {
			panic("capability table: size " + t + " is not \"resolution ratio WxH\"")
		}
		if out[f[0]] == nil {
			out[f[0]] = map[string]string{}
		}
		out[f[0]][f[1]] = f[2]
	}
	return out
}

// SecondsFrom lists lo to hi.
func SecondsFrom(lo, hi int) []int {
	out := make([]int, 0, hi-lo+1)
	for s := lo; s <= hi; s++ {
		out = append(out, s)
	}
	return out
}

func intersect(a, b []int) []int {
	out := []int{}
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// Everything is what a route renders that no table bounds (the simulator's own protocol, a base URL
// configured without an upstreams file): every duration, size and input the API sells, with sound on
// request and a seed.
func Everything(alias string) Capabilities {
	m, _ := catalog.Lookup(alias)
	return Capabilities{Seconds: SecondsFrom(MinSeconds, MaxSeconds), Sizes: m.SizeList(), Inputs: slices.Clone(Inputs), Audio: true, Seed: true}
}

// Refuse is what the row's provider refuses of a request as it arrives on the wire — seconds, the
// resolution and ratio (or, for ExactSizes rows, the pixel size), the inputs with their limits, sound,
// and the rules — for the simulators, which answer it in each provider's own error shape. It is the
// same table the platform sells from, so what the platform accepts the simulator renders.
func (row ModelRow) Refuse(resolution, ratio string, req models.VideoRequest) *UnsupportedError {
	no := func(param, format string, args ...any) *UnsupportedError {
		return &UnsupportedError{Code: CodeUnsupportedValue, Param: param, Message: fmt.Sprintf(format, args...)}
	}
	if !slices.Contains(row.Seconds, req.Seconds) {
		return no("seconds", "%s renders %s seconds, not %d", row.ID, orList(intStrings(slices.Clone(row.Seconds))), req.Seconds)
	}
	if row.ExactSizes {
		if !row.RendersAnySize(req.Size) {
			return no("size", "%s does not render %s", row.ID, req.Size)
		}
	} else if _, ok := row.Sizes[resolution][ratio]; !ok {
		return no("resolution", "%s does not render %s at %s", row.ID, resolution, ratio)
	}
	c := Capabilities{Limits: row.Inputs}
	for in := range row.Inputs {
		c.Inputs = append(c.Inputs, in)
	}
	for _, in := range RequestInputs(req) {
		if !c.Takes(in) {
			return no(inputParam[in], "%s takes no %s", row.ID, inputWords[in])
		}
	}
	if req.GenerateAudio && row.Audio == AudioNone {
		return no("generate_audio", "%s renders silent video only", row.ID)
	}
	for _, r := range row.Rules {
		if len(r.IfInputs) == 0 {
			if slices.Contains(r.IfResolutions, resolution) && r.Seconds != nil && !slices.Contains(r.Seconds, req.Seconds) {
				return no("seconds", "%s (%s)", r.Words, row.ID)
			}
			continue
		}
		rr := RouteRule{Words: r.Words, IfInputs: r.IfInputs, Seconds: r.Seconds, Without: r.Without, Needs: r.Needs}
		if r.Ratios != nil {
			rr.Sizes = []string{}
			if slices.Contains(r.Ratios, ratio) {
				rr.Sizes = []string{req.Size}
			}
		}
		if r.Resolutions != nil && !slices.Contains(r.Resolutions, resolution) && slices.ContainsFunc(r.IfInputs, func(in string) bool { return slices.Contains(RequestInputs(req), in) }) {
			return no("resolution", "%s (%s)", r.Words, row.ID)
		}
		c.Rules = append(c.Rules, rr)
	}
	if err := c.RuleRefusal(req); err != nil {
		return err
	}
	return c.LimitRefusal(req)
}
