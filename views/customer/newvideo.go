package customer

import (
	"slices"
	"strings"
)

// NewVideoModel is a model the console can make a video with now: what some route renders, and its
// price.
type NewVideoModel struct {
	ID              string
	MicrosPerSecond int64
	Seconds         []int
	Sizes           map[string]string // aspect ratio → WxH
	Ratios          []string          // the ratios of Sizes, in the catalog's order
	Inputs          []string          // first_frame, last_frame, reference_images, … (upstream.Input*)
	Audio           bool
	Rules           []string
}

// Takes reports whether the model takes an input (upstream.InputFirstFrame, …).
func (m NewVideoModel) Takes(input string) bool { return slices.Contains(m.Inputs, input) }

// NewVideoPage is /console/videos/new: the choices (model, seconds, size) that set the price, chosen
// first by a GET form, and the prompt and media posted with them.
type NewVideoPage struct {
	Models   []NewVideoModel
	Model    NewVideoModel // the chosen one (the first when none was chosen)
	Seconds  int
	Size     string
	Prompt   string
	Audio    bool
	Verified bool
	// Available is the account's available balance, to say before the submit whether it covers the price.
	Available int64
	// Error is a refusal of the posted form, in the API's words; Param the field it names.
	Error, Param string
	// Once is the form's idempotency key: a second submit of the same form (a double click, a reload
	// that posts again) finds the first video instead of paying for another.
	Once string
}

// Price is what the chosen video costs: seconds × the model's price per second.
func (p NewVideoPage) Price() int64 { return p.Model.MicrosPerSecond * int64(p.Seconds) }

// FieldError is the refusal when it names field (or one of its items: "image_urls[1]").
func (p NewVideoPage) FieldError(fields ...string) string {
	for _, f := range fields {
		if p.Param == f || strings.HasPrefix(p.Param, f+"[") {
			return p.Error
		}
	}
	return ""
}

// besideFields are the fields whose refusal shows beside them; any other shows above the form.
var besideFields = []string{"prompt", "input_reference", "start_image_url", "end_image_url", "image_urls"}

// GeneralError is the refusal when no field of the form shows it.
func (p NewVideoPage) GeneralError() string {
	if p.FieldError(besideFields...) != "" {
		return ""
	}
	return p.Error
}

// SizeLabel: "16:9 · 1280x720".
func SizeLabel(ratio, size string) string { return ratio + " · " + size }
