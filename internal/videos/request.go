package videos

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"videogen/internal/apierr"
	"videogen/internal/catalog"
	"videogen/internal/media"
	"videogen/models"
)

// Limits of a create request (the interface document's Limits table).
const (
	MinSeconds     = 4
	MaxSeconds     = 15
	DefaultSeconds = 4
	MaxPromptChars = 5000
	MaxImages      = 9
	MaxVideos      = 3
	MaxAudios      = 3
	maxURLBytes    = 8192
)

// CreateRequest is a validated POST /v1/videos body with every default applied.
type CreateRequest struct {
	Model         string   `json:"model"`
	Prompt        string   `json:"prompt"`
	Seconds       int      `json:"seconds"`
	AspectRatio   string   `json:"aspect_ratio"`
	Size          string   `json:"size"`
	GenerateAudio bool     `json:"generate_audio"`
	Watermark     bool     `json:"watermark"`
	ImageURLs     []string `json:"image_urls"`
	VideoURLs     []string `json:"video_urls"`
	AudioURLs     []string `json:"audio_urls"`
	StartImageURL string   `json:"start_image_url"`
	EndImageURL   string   `json:"end_image_url"`

	// Media are the files the URLs refer to, in field order.
	Media []media.FieldRef `json:"-"`
}

// Inputs returns the request's media as a task stores them.
func (r *CreateRequest) Inputs() models.TaskInputs {
	return models.TaskInputs{ImageURLs: r.ImageURLs, VideoURLs: r.VideoURLs, AudioURLs: r.AudioURLs,
		StartImageURL: r.StartImageURL, EndImageURL: r.EndImageURL}
}

// Hash identifies the normalised request (defaults applied), for Idempotency-Key comparison: two
// bodies that mean the same task hash the same.
func (r *CreateRequest) Hash() string {
	// Files by id, not by URL: the same file under a URL signed later is the same request.
	norm := *r
	norm.ImageURLs, norm.VideoURLs, norm.AudioURLs, norm.StartImageURL, norm.EndImageURL = nil, nil, nil, "", ""
	b, _ := json.Marshal(struct {
		*CreateRequest
		Files []media.FieldRef `json:"files"`
	}{&norm, r.Media})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// MediaPolicy decides which media URLs a create request may carry: only those this platform signed.
type MediaPolicy struct {
	Signer *media.Signer
	Now    func() time.Time
}

var knownFields = map[string]bool{
	"model": true, "prompt": true, "seconds": true, "duration": true, "aspect_ratio": true, "size": true,
	"generate_audio": true, "watermark": true, "image_urls": true, "video_urls": true, "audio_urls": true,
	"start_image_url": true, "end_image_url": true,
}

var sizePattern = regexp.MustCompile(`^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$`)

// ParseCreate decodes and validates a create body. Every rule of the interface and of DESIGN §5–7 is
// checked here, so the handler only passes bytes in and an error or a request out.
func ParseCreate(body []byte, policy MediaPolicy) (*CreateRequest, *apierr.Error) {
	fields, aerr := decodeObject(body)
	if aerr != nil {
		return nil, aerr
	}
	for _, name := range sortedKeys(fields) {
		if !knownFields[name] {
			return nil, apierr.Field(400, "unknown_field", name, "Unknown field %q. Accepted fields: model, prompt, seconds (or duration), aspect_ratio, size, generate_audio, watermark, image_urls, video_urls, audio_urls, start_image_url, end_image_url.", name)
		}
	}
	r := &CreateRequest{}

	// model
	model, present, aerr := stringField(fields, "model", "invalid_model")
	if aerr != nil {
		return nil, aerr
	}
	if !present {
		return nil, apierr.Field(400, "missing_field", "model", "The field model is required. GET /v1/models lists the model ids.")
	}
	m, ok := catalog.Lookup(model)
	if !ok {
		return nil, apierr.Field(400, "invalid_model", "model", "Unknown model %q. GET /v1/models lists the model ids.", truncate(model, 100))
	}
	r.Model = m.ID

	// prompt
	prompt, present, aerr := stringField(fields, "prompt", "invalid_prompt")
	if aerr != nil {
		return nil, aerr
	}
	if !present {
		return nil, apierr.Field(400, "missing_field", "prompt", "The field prompt is required: describe the video in 1 to %d characters.", MaxPromptChars)
	}
	n := utf8.RuneCountInString(prompt)
	if n == 0 || strings.TrimFunc(prompt, unicode.IsSpace) == "" {
		return nil, apierr.Field(400, "invalid_prompt", "prompt", "The prompt is empty: describe the video in 1 to %d characters.", MaxPromptChars)
	}
	if n > MaxPromptChars {
		return nil, apierr.Field(400, "invalid_prompt", "prompt", "The prompt has %d characters; at most %d are allowed.", n, MaxPromptChars)
	}
	if strings.ContainsRune(prompt, 0) {
		return nil, apierr.Field(400, "invalid_prompt", "prompt", "The prompt contains a NUL character (\\u0000); remove it.")
	}
	r.Prompt = prompt

	// seconds / duration
	secs, hasSecs, aerr := secondsField(fields, "seconds")
	if aerr != nil {
		return nil, aerr
	}
	dur, hasDur, aerr := secondsField(fields, "duration")
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case hasSecs && hasDur && secs != dur:
		return nil, apierr.Field(400, "seconds_duration_mismatch", "duration", "seconds (%d) and duration (%d) differ; send one of them, or the same value in both.", secs, dur)
	case hasSecs:
		r.Seconds = secs
	case hasDur:
		r.Seconds = dur
	default:
		r.Seconds = DefaultSeconds
	}

	// aspect_ratio and size
	ratio, hasRatio, aerr := stringField(fields, "aspect_ratio", "invalid_aspect_ratio")
	if aerr != nil {
		return nil, aerr
	}
	if hasRatio && !catalog.ValidRatio(ratio) {
		return nil, apierr.Field(400, "invalid_aspect_ratio", "aspect_ratio", "aspect_ratio %q is not supported; use one of %s.", truncate(ratio, 20), strings.Join(catalog.Ratios, ", "))
	}
	size, hasSize, aerr := stringField(fields, "size", "invalid_size")
	if aerr != nil {
		return nil, aerr
	}
	if hasSize {
		if !sizePattern.MatchString(size) {
			return nil, apierr.Field(400, "invalid_size", "size", "size must look like <width>x<height>, e.g. %q; omit it to get the model's size for the aspect ratio.", mustSize(m, catalog.DefaultRatio))
		}
		sizeRatio, ok := m.RatioOfSize(size)
		if !ok {
			return nil, apierr.Field(400, "size_mismatch", "size", "size %s is not a %s size of %s; its sizes are %s.", size, m.Resolution, m.ID, sizeList(m))
		}
		if hasRatio && sizeRatio != ratio {
			return nil, apierr.Field(400, "size_mismatch", "size", "size %s is the %s size of %s, but aspect_ratio is %s, whose size is %s.", size, sizeRatio, m.ID, ratio, mustSize(m, ratio))
		}
		ratio = sizeRatio // OpenAI's SDKs send only size: the ratio is the one whose size it is
	} else if !hasRatio {
		ratio = catalog.DefaultRatio
	}
	r.AspectRatio = ratio
	r.Size = mustSize(m, ratio)

	// flags
	if r.GenerateAudio, aerr = boolField(fields, "generate_audio"); aerr != nil {
		return nil, aerr
	}
	if r.Watermark, aerr = boolField(fields, "watermark"); aerr != nil {
		return nil, aerr
	}

	// media
	if r.ImageURLs, aerr = urlList(fields, "image_urls"); aerr != nil {
		return nil, aerr
	}
	if r.VideoURLs, aerr = urlList(fields, "video_urls"); aerr != nil {
		return nil, aerr
	}
	if r.AudioURLs, aerr = urlList(fields, "audio_urls"); aerr != nil {
		return nil, aerr
	}
	if r.StartImageURL, _, aerr = stringField(fields, "start_image_url", "invalid_media_url"); aerr != nil {
		return nil, aerr
	}
	if r.EndImageURL, _, aerr = stringField(fields, "end_image_url", "invalid_media_url"); aerr != nil {
		return nil, aerr
	}
	images := len(r.ImageURLs)
	if r.StartImageURL != "" {
		images++
	}
	if r.EndImageURL != "" {
		images++
	}
	if images > MaxImages {
		return nil, apierr.Field(400, "too_many_images", "image_urls", "%d images were given; at most %d are allowed over image_urls, start_image_url and end_image_url together.", images, MaxImages)
	}
	if len(r.VideoURLs) > MaxVideos {
		return nil, apierr.Field(400, "too_many_videos", "video_urls", "%d videos were given; at most %d are allowed.", len(r.VideoURLs), MaxVideos)
	}
	if len(r.AudioURLs) > MaxAudios {
		return nil, apierr.Field(400, "too_many_audios", "audio_urls", "%d audio files were given; at most %d are allowed.", len(r.AudioURLs), MaxAudios)
	}
	for _, list := range []struct {
		name string
		urls []string
	}{{"image_urls", r.ImageURLs}, {"video_urls", r.VideoURLs}, {"audio_urls", r.AudioURLs},
		{"start_image_url", nonEmpty(r.StartImageURL)}, {"end_image_url", nonEmpty(r.EndImageURL)}} {
		for i, u := range list.urls {
			param := list.name
			if strings.HasSuffix(list.name, "_urls") {
				param = fmt.Sprintf("%s[%d]", list.name, i)
			}
			ref, aerr := policy.check(list.name, i, param, u)
			if aerr != nil {
				return nil, aerr
			}
			r.Media = append(r.Media, ref)
		}
	}
	return r, nil
}

// decodeObject reads body as one JSON object and returns its members undecoded.
func decodeObject(body []byte) (map[string]json.RawMessage, *apierr.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, apierr.New(400, "invalid_json", "The request body is empty; send a JSON object such as {\"model\": \"videogen-2.0-720p\", \"prompt\": \"...\"}.")
	}
	if trimmed[0] != '{' {
		return nil, apierr.New(400, "invalid_json", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, apierr.New(400, "invalid_json", "The request body is not valid JSON: %s.", jsonReason(err))
	}
	if dec.More() {
		return nil, apierr.New(400, "invalid_json", "The request body has data after the JSON object.")
	}
	if _, err := dec.Token(); err == nil {
		return nil, apierr.New(400, "invalid_json", "The request body has data after the JSON object.")
	}
	return fields, nil
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	return err.Error()
}

// isNull reports whether a member is absent or JSON null; optional fields treat both as "not given".
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func stringField(fields map[string]json.RawMessage, name, code string) (string, bool, *apierr.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, apierr.Field(400, code, name, "%s must be a string.", name)
	}
	return s, true, nil
}

func boolField(fields map[string]json.RawMessage, name string) (bool, *apierr.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, apierr.Field(400, "invalid_request", name, "%s must be true or false.", name)
	}
	return b, nil
}

// secondsField reads an integer given as a JSON number or a string of digits (OpenAI's SDKs send "8").
func secondsField(fields map[string]json.RawMessage, name string) (int, bool, *apierr.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	bad := apierr.Field(400, "invalid_seconds", name, "%s must be a whole number of seconds from %d to %d, as a number or a string of digits.", name, MinSeconds, MaxSeconds)
	text := strings.TrimSpace(string(raw))
	if strings.HasPrefix(text, `"`) {
		if err := json.Unmarshal(raw, &text); err != nil {
			return 0, false, bad
		}
	}
	if text == "" || len(text) > 6 {
		return 0, false, bad
	}
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false, bad
		}
	}
	v, err := strconv.Atoi(text)
	if err != nil || v < MinSeconds || v > MaxSeconds {
		return 0, false, bad
	}
	return v, true, nil
}

func urlList(fields map[string]json.RawMessage, name string) ([]string, *apierr.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, apierr.Field(400, "invalid_request", name, "%s must be an array of URL strings.", name)
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		var s string
		if err := json.Unmarshal(item, &s); err != nil {
			return nil, apierr.Field(400, "invalid_media_url", fmt.Sprintf("%s[%d]", name, i), "%s[%d] must be a URL string.", name, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// check accepts only URLs this platform signed, not expired. Whether the file belongs to the caller and
// still exists is checked in the create transaction (media.Service.Attach).
func (p MediaPolicy) check(field string, position int, param, raw string) (media.FieldRef, *apierr.Error) {
	how := "Upload the file with POST /uploads/v1/files or import it with POST /uploads/v1/import and use the url it returns."
	if raw == "" {
		return media.FieldRef{}, apierr.Field(400, "invalid_media_url", param, "%s is empty. %s", param, how)
	}
	if len(raw) > maxURLBytes || !utf8.ValidString(raw) || strings.ContainsFunc(raw, unicode.IsControl) {
		return media.FieldRef{}, apierr.Field(400, "invalid_media_url", param, "%s is not a media URL issued by this platform. %s", param, how)
	}
	ref, err := p.Signer.Parse(raw, p.now())
	switch {
	case errors.Is(err, media.ErrExpired):
		return media.FieldRef{}, apierr.Field(400, "invalid_media_url", param, "%s expired at %s. Upload or import the file again to get a fresh URL.", param, ref.Expires.UTC().Format(time.RFC3339))
	case err != nil:
		return media.FieldRef{}, apierr.Field(400, "invalid_media_url", param, "%s is not a media URL issued by this platform (only URLs from the media entry points are accepted, unchanged). %s", param, how)
	}
	return media.FieldRef{Field: field, Position: position, Param: param, Kind: media.FieldKind(field), ID: ref.ID}, nil
}

func (p MediaPolicy) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func mustSize(m catalog.Model, ratio string) string {
	s, _ := m.Size(ratio)
	return s
}

func sizeList(m catalog.Model) string {
	parts := make([]string, 0, len(catalog.Ratios))
	for _, r := range catalog.Ratios {
		parts = append(parts, fmt.Sprintf("%s (%s)", mustSize(m, r), r))
	}
	return strings.Join(parts, ", ")
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Deterministic order so the same body always names the same unknown field.
	sort.Strings(keys)
	return keys
}
