// Package catalog is the fixed list of public models and the output size of each model for each
// aspect ratio (docs/design.md §4). Prices live in billing; this package knows only what a model renders.
package catalog

// Model is one public model alias.
type Model struct {
	ID         string
	Series     string // Standard, Fast or Mini
	Resolution string // 480p, 720p or 1080p
}

// Ratios lists the accepted aspect ratios, widest first.
var Ratios = []string{"21:9", "16:9", "4:3", "1:1", "3:4", "9:16"}

// DefaultRatio is used when a request names neither aspect_ratio nor size.
const DefaultRatio = "16:9"

// Models lists the eight public models in the order docs/api.md gives them.
var Models = []Model{
	{"videogen-2.0-480p", "Standard", "480p"},
	{"videogen-2.0-720p", "Standard", "720p"},
	{"videogen-2.0-1080p", "Standard", "1080p"},
	{"videogen-2.0-fast-480p", "Fast", "480p"},
	{"videogen-2.0-fast-720p", "Fast", "720p"},
	{"videogen-2.0-fast-1080p", "Fast", "1080p"},
	{"videogen-2.0-mini-480p", "Mini", "480p"},
	{"videogen-2.0-mini-720p", "Mini", "720p"},
}

// sizes maps resolution → ratio → "WxH", the sizes Seedance-2.0-class providers render.
var sizes = map[string]map[string]string{
	"480p": {
		"21:9": "992x432", "16:9": "864x496", "4:3": "752x560",
		"1:1": "640x640", "3:4": "560x752", "9:16": "496x864",
	},
	"720p": {
		"21:9": "1470x630", "16:9": "1280x720", "4:3": "1112x834",
		"1:1": "960x960", "3:4": "834x1112", "9:16": "720x1280",
	},
	"1080p": {
		"21:9": "2206x946", "16:9": "1920x1080", "4:3": "1664x1248",
		"1:1": "1440x1440", "3:4": "1248x1664", "9:16": "1080x1920",
	},
}

var byID = func() map[string]Model {
	m := make(map[string]Model, len(Models))
	for _, x := range Models {
		m[x.ID] = x
	}
	return m
}()

// Lookup returns the model with this id.
func Lookup(id string) (Model, bool) {
	m, ok := byID[id]
	return m, ok
}

// ValidRatio reports whether r is an accepted aspect ratio.
func ValidRatio(r string) bool {
	_, ok := sizes["480p"][r]
	return ok
}

// Size returns the model's output size for a ratio ("1280x720" for 720p 16:9).
func (m Model) Size(ratio string) (string, bool) {
	s, ok := sizes[m.Resolution][ratio]
	return s, ok
}

// SizeList lists the model's sizes, widest ratio first.
func (m Model) SizeList() []string {
	out := make([]string, 0, len(Ratios))
	for _, r := range Ratios {
		if s, ok := sizes[m.Resolution][r]; ok {
			out = append(out, s)
		}
	}
	return out
}

// Sizes returns ratio → size for the model.
func (m Model) Sizes() map[string]string {
	out := make(map[string]string, len(Ratios))
	for r, s := range sizes[m.Resolution] {
		out[r] = s
	}
	return out
}

// RatioOfSize returns the aspect ratio whose size for this model is size, if any.
func (m Model) RatioOfSize(size string) (string, bool) {
	for r, s := range sizes[m.Resolution] {
		if s == size {
			return r, true
		}
	}
	return "", false
}
