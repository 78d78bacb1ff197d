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

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/media"
	"videogen/internal/refusal"
	"videogen/models"
)

// Limits of a create request (docs/api.md, Limits).
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

// CreateRequest is a validated POST /v1/videos body with every default applied: the video request that
// the task stores and the upstream is sent, and the files its media URLs refer to.
type CreateRequest struct {
	models.VideoRequest
	// Media are the files the URLs refer to, in field order.
	Media []media.FieldRef
	// RemixedFromVideoID is the video a remix is made from ("" for a create); Service.Remix sets it.
	RemixedFromVideoID string
}

// Hash identifies the normalised request (defaults applied), for Idempotency-Key comparison: two
// bodies that mean the same task hash the same. Files count by id, not by URL: the same file under a
// URL signed later is the same request. The form hashed is frozen here — hashes are stored for 24 hours
// and must not change across a release.
func (r *CreateRequest) Hash() string {
	b, _ := json.Marshal(struct {
		Model         string           `json:"model"`
		Prompt        string           `json:"prompt"`
		Seconds       int              `json:"seconds"`
		AspectRatio   string           `json:"aspect_ratio"`
		Size          string           `json:"size"`
		GenerateAudio bool             `json:"generate_audio"`
		Watermark     bool             `json:"watermark"`
		ImageURLs     []string         `json:"image_urls"`
		VideoURLs     []string         `json:"video_urls"`
		AudioURLs     []string         `json:"audio_urls"`
		StartImageURL string           `json:"start_image_url"`
		EndImageURL   string           `json:"end_image_url"`
		Files         []media.FieldRef `json:"files"`
		// Added later, omitted when absent, so every request without a seed hashes as it always did.
		Seed *int64 `json:"seed,omitempty"`
		// Added with remix, omitted for a create, for the same reason.
		RemixOf string `json:"remixed_from_video_id,omitempty"`
	}{Model: r.Model, Prompt: r.Prompt, Seconds: r.Seconds, AspectRatio: r.AspectRatio, Size: r.Size,
		GenerateAudio: r.GenerateAudio, Watermark: r.Watermark, Files: hashedFiles(r.Media), Seed: r.Seed,
		RemixOf: r.RemixedFromVideoID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// hashedFiles is refs as Hash counts them: a file the request carried in its own body (SHA256 set) by its
// bytes, since each retry stores it anew under another id; every other file by its id, as always.
func hashedFiles(refs []media.FieldRef) []media.FieldRef {
	if refs == nil {
		return nil // hashed as null, as it always was
	}
	out := make([]media.FieldRef, len(refs))
	for i, r := range refs {
		if r.SHA256 != "" {
			r.ID = ""
		}
		out[i] = r
	}
	return out
}

// MediaPolicy decides which media URLs a create request may carry: only those this platform signed.
type MediaPolicy struct {
	Signer *media.Signer
	Now    func() time.Time
}

var knownFields = map[string]bool{
	"model": true, "prompt": true, "seconds": true, "duration": true, "aspect_ratio": true, "size": true,
	"generate_audio": true, "watermark": true, "image_urls": true, "video_urls": true, "audio_urls": true,
	"start_image_url": true, "end_image_url": true, "seed": true, "input_reference": true,
}

var sizePattern = regexp.MustCompile(`^([1-9][0-9]{0,4})x([1-9][0-9]{0,4})$`)

// parsing is a create body on its way to a CreateRequest.
type parsing struct {
	fields map[string]json.RawMessage
	policy MediaPolicy
	model  catalog.Model
	r      CreateRequest
	// file is the input_reference a multipart create carried as a file part, stored already (nil: none).
	file *FormFile
	// startParam names the first frame in refusals: start_image_url, or the input_reference that set it.
	startParam string
}

// A rule reads or checks one part of a create body. The rules run in order and the first refusal is the
// answer, so the order below is the order in which a client learns what to fix.
type rule func(p *parsing) *refusal.Error

var createRules = []rule{
	onlyKnownFields, readModel, readPrompt, readSeconds, readRatioAndSize, readFlags, readSeed,
	readMediaURLs, readInputReference, countMedia, acceptOnlyOurMedia,
}

// ParseCreate decodes and validates a create body: every rule of docs/api.md and of docs/design.md
// (sizes, tasks, errors, media), so the handler only passes bytes in and an error or a request out.
func ParseCreate(body []byte, policy MediaPolicy) (*CreateRequest, *refusal.Error) {
	fields, aerr := decodeObject(body)
	if aerr != nil {
		return nil, aerr
	}
	return parseFields(fields, policy, nil)
}

// parseFields runs every rule over a create body's members: the one validation path of both forms the
// body may take (JSON, and multipart text fields turned into JSON members by ParseCreateForm).
func parseFields(fields map[string]json.RawMessage, policy MediaPolicy, file *FormFile) (*CreateRequest, *refusal.Error) {
	p := &parsing{fields: fields, policy: policy, file: file, startParam: "start_image_url"}
	for _, check := range createRules {
		if aerr := check(p); aerr != nil {
			return nil, aerr
		}
	}
	return &p.r, nil
}

func onlyKnownFields(p *parsing) *refusal.Error {
	for _, name := range sortedKeys(p.fields) {
		if !knownFields[name] {
			// A field name may be any length (up to the body's limit): the answer quotes at most 100 characters.
			return refusal.Field("unknown_field", truncate(name, 100), "Unknown field %q. Accepted fields: model, prompt, seconds (or duration), aspect_ratio, size, generate_audio, watermark, seed, image_urls, video_urls, audio_urls, start_image_url, end_image_url, input_reference.", truncate(name, 100))
		}
	}
	return nil
}

func readModel(p *parsing) *refusal.Error {
	model, present, aerr := stringField(p.fields, "model", "invalid_model")
	if aerr != nil {
		return aerr
	}
	if !present {
		return refusal.Field("missing_field", "model", "The field model is required. GET /v1/models lists the model ids.")
	}
	m, ok := catalog.Lookup(model)
	if !ok {
		return refusal.Field("invalid_model", "model", "Unknown model %q. GET /v1/models lists the model ids.", truncate(model, 100))
	}
	p.model, p.r.Model = m, m.ID
	return nil
}

// readPrompt: 1 to 5000 characters (Unicode code points), not only whitespace, no NUL.
func readPrompt(p *parsing) *refusal.Error {
	prompt, present, aerr := stringField(p.fields, "prompt", "invalid_prompt")
	if aerr != nil {
		return aerr
	}
	if !present {
		return refusal.Field("missing_field", "prompt", "The field prompt is required: describe the video in 1 to %d characters.", MaxPromptChars)
	}
	n := utf8.RuneCountInString(prompt)
	if n == 0 || strings.TrimFunc(prompt, unicode.IsSpace) == "" {
		return refusal.Field("invalid_prompt", "prompt", "The prompt is empty: describe the video in 1 to %d characters.", MaxPromptChars)
	}
	if n > MaxPromptChars {
		return refusal.Field("invalid_prompt", "prompt", "The prompt has %d characters; at most %d are allowed.", n, MaxPromptChars)
	}
	if strings.ContainsRune(prompt, 0) {
		return refusal.Field("invalid_prompt", "prompt", "The prompt contains a NUL character (\\u0000); remove it.")
	}
	p.r.Prompt = prompt
	return nil
}

// readSeconds: seconds or its alias duration, equal when both are given, 4 by default.
func readSeconds(p *parsing) *refusal.Error {
	secs, hasSecs, aerr := secondsField(p.fields, "seconds")
	if aerr != nil {
		return aerr
	}
	dur, hasDur, aerr := secondsField(p.fields, "duration")
	if aerr != nil {
		return aerr
	}
	switch {
	case hasSecs && hasDur && secs != dur:
		return refusal.Field("seconds_duration_mismatch", "duration", "seconds (%d) and duration (%d) differ; send one of them, or the same value in both.", secs, dur)
	case hasSecs:
		p.r.Seconds = secs
	case hasDur:
		p.r.Seconds = dur
	default:
		p.r.Seconds = DefaultSeconds
	}
	return nil
}

// readRatioAndSize: a size must be one of the model's, and agree with aspect_ratio when both are given;
// size alone sets the ratio (OpenAI's SDKs send only size); the stored size is always the model's.
func readRatioAndSize(p *parsing) *refusal.Error {
	m := p.model
	ratio, hasRatio, aerr := stringField(p.fields, "aspect_ratio", "invalid_aspect_ratio")
	if aerr != nil {
		return aerr
	}
	if hasRatio && !catalog.ValidRatio(ratio) {
		return refusal.Field("invalid_aspect_ratio", "aspect_ratio", "aspect_ratio %q is not supported; use one of %s.", truncate(ratio, 20), strings.Join(catalog.Ratios, ", "))
	}
	size, hasSize, aerr := stringField(p.fields, "size", "invalid_size")
	if aerr != nil {
		return aerr
	}
	if hasSize {
		if !sizePattern.MatchString(size) {
			return refusal.Field("invalid_size", "size", "size must look like <width>x<height>, e.g. %q; omit it to get the model's size for the aspect ratio.", mustSize(m, catalog.DefaultRatio))
		}
		sizeRatio, ok := m.RatioOfSize(size)
		if !ok {
			return refusal.Field("size_mismatch", "size", "size %s is not a %s size of %s; its sizes are %s.", size, m.Resolution, m.ID, sizeList(m))
		}
		if hasRatio && sizeRatio != ratio {
			return refusal.Field("size_mismatch", "size", "size %s is the %s size of %s, but aspect_ratio is %s, whose size is %s.", size, sizeRatio, m.ID, ratio, mustSize(m, ratio))
		}
		ratio = sizeRatio
	} else if !hasRatio {
		ratio = catalog.DefaultRatio
	}
	p.r.AspectRatio, p.r.Size = ratio, mustSize(m, ratio)
	return nil
}

func readFlags(p *parsing) *refusal.Error {
	var aerr *refusal.Error
	if p.r.GenerateAudio, aerr = boolField(p.fields, "generate_audio"); aerr != nil {
		return aerr
	}
	p.r.Watermark, aerr = boolField(p.fields, "watermark")
	return aerr
}

// MaxSeed is the largest seed: providers take an unsigned 32-bit seed (docs/api.md).
const MaxSeed = 1<<32 - 1

// readSeed: optional; a whole number from -1 to MaxSeed, where -1 (like leaving it out) means a random
// seed. It asks the provider for a reproducible generation where it supports one.
func readSeed(p *parsing) *refusal.Error {
	raw, ok := p.fields["seed"]
	if !ok || isNull(raw) {
		return nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || v < -1 || v > MaxSeed {
		return refusal.Field("invalid_seed", "seed", "seed must be a whole number from -1 (random) to %d.", int64(MaxSeed))
	}
	if v >= 0 {
		p.r.Seed = &v
	}
	return nil
}

func readMediaURLs(p *parsing) *refusal.Error {
	in := &p.r.TaskInputs
	var aerr *refusal.Error
	if in.ImageURLs, aerr = urlList(p.fields, "image_urls"); aerr != nil {
		return aerr
	}
	if in.VideoURLs, aerr = urlList(p.fields, "video_urls"); aerr != nil {
		return aerr
	}
	if in.AudioURLs, aerr = urlList(p.fields, "audio_urls"); aerr != nil {
		return aerr
	}
	if in.StartImageURL, _, aerr = stringField(p.fields, "start_image_url", "invalid_media_url"); aerr != nil {
		return aerr
	}
	in.EndImageURL, _, aerr = stringField(p.fields, "end_image_url", "invalid_media_url")
	return aerr
}

// readInputReference: OpenAI's first-frame image, {"image_url": "<URL>"} (as JSON, or as the multipart
// text part input_reference[image_url]), or a file part of a multipart create (FormFile). It is the
// video's first frame, exactly as start_image_url — so it is one of the 9 images, and giving both is
// ambiguous and refused. OpenAI's {"file_id"} names a file of OpenAI's Files API, which this API has
// none of: refused with its own code, saying what to send instead.
func readInputReference(p *parsing) *refusal.Error {
	raw, given := p.fields["input_reference"]
	if given && isNull(raw) {
		given = false
	}
	if !given {
		return nil
	}
	if p.r.StartImageURL != "" {
		return refusal.Field("conflicting_fields", "input_reference", "input_reference and start_image_url both set the video's first frame; send one of them.")
	}
	if p.file != nil {
		p.r.StartImageURL, p.startParam = p.file.URL, "input_reference"
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return refusal.Field("invalid_request", "input_reference", `input_reference must be an object {"image_url": "<URL>"} (or, in a multipart create, a file part holding the image).`)
	}
	for _, name := range sortedKeys(obj) {
		switch name {
		case "image_url":
		case "file_id":
			if !isNull(obj[name]) {
				return refusal.Field("file_id_not_supported", "input_reference.file_id", "input_reference.file_id names a file of OpenAI's Files API, which this API does not have. Send the image as input_reference.image_url (a URL from POST /uploads/v1/files or POST /uploads/v1/import), or as a file part named input_reference of a multipart create.")
			}
		default:
			return refusal.Field("unknown_field", "input_reference."+truncate(name, 100), "Unknown field %q of input_reference; it takes image_url.", truncate(name, 100))
		}
	}
	u, present, aerr := stringField(obj, "image_url", "invalid_media_url")
	if aerr != nil {
		aerr.Param = "input_reference.image_url"
		aerr.Message = "input_reference.image_url must be a string."
		return aerr
	}
	if !present {
		return refusal.Field("missing_field", "input_reference.image_url", `input_reference needs image_url: {"image_url": "<URL>"}, the URL of an image from POST /uploads/v1/files or POST /uploads/v1/import.`)
	}
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(u)), "data:") {
		return refusal.Field("invalid_media_url", "input_reference.image_url", "input_reference.image_url is a data: URL; this API takes media only by the URLs its media entry points issue. Upload the image with POST /uploads/v1/files (or send it as a file part named input_reference) and use the url it returns.")
	}
	p.r.StartImageURL, p.startParam = u, "input_reference.image_url"
	return nil
}

// countMedia: at most 9 images over every image field (first and last frames included), 3 videos, 3
// audio files.
func countMedia(p *parsing) *refusal.Error {
	in := p.r.TaskInputs
	images := len(in.ImageURLs) + len(nonEmpty(in.StartImageURL)) + len(nonEmpty(in.EndImageURL))
	if images > MaxImages {
		return refusal.Field("too_many_images", "image_urls", "%d images were given; at most %d are allowed over image_urls, start_image_url and end_image_url together.", images, MaxImages)
	}
	if len(in.VideoURLs) > MaxVideos {
		return refusal.Field("too_many_videos", "video_urls", "%d videos were given; at most %d are allowed.", len(in.VideoURLs), MaxVideos)
	}
	if len(in.AudioURLs) > MaxAudios {
		return refusal.Field("too_many_audios", "audio_urls", "%d audio files were given; at most %d are allowed.", len(in.AudioURLs), MaxAudios)
	}
	return nil
}

// acceptOnlyOurMedia: every media URL must be one this platform signed, not expired.
func acceptOnlyOurMedia(p *parsing) *refusal.Error {
	in := p.r.TaskInputs
	for _, list := range []struct {
		name string
		urls []string
	}{{"image_urls", in.ImageURLs}, {"video_urls", in.VideoURLs}, {"audio_urls", in.AudioURLs},
		{"start_image_url", nonEmpty(in.StartImageURL)}, {"end_image_url", nonEmpty(in.EndImageURL)}} {
		for i, u := range list.urls {
			param := list.name
			if strings.HasSuffix(list.name, "_urls") {
				param = fmt.Sprintf("%s[%d]", list.name, i)
			}
			if list.name == "start_image_url" {
				param = p.startParam
			}
			ref, aerr := p.policy.check(list.name, i, param, u)
			if aerr != nil {
				return aerr
			}
			if list.name == "start_image_url" && p.file != nil {
				ref.SHA256 = p.file.SHA256
			}
			p.r.Media = append(p.r.Media, ref)
		}
	}
	return nil
}

// decodeObject reads body as one JSON object and returns its members undecoded.
func decodeObject(body []byte) (map[string]json.RawMessage, *refusal.Error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, refusal.New("invalid_json", "The request body is empty; send a JSON object such as {\"model\": \"videogen-2.0-720p\", \"prompt\": \"...\"}.")
	}
	if trimmed[0] != '{' {
		return nil, refusal.New("invalid_json", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, refusal.New("invalid_json", "The request body is not valid JSON: %s.", jsonReason(err))
	}
	if dec.More() {
		return nil, refusal.New("invalid_json", "The request body has data after the JSON object.")
	}
	if _, err := dec.Token(); err == nil {
		return nil, refusal.New("invalid_json", "The request body has data after the JSON object.")
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

func stringField(fields map[string]json.RawMessage, name, code string) (string, bool, *refusal.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, refusal.Field(code, name, "%s must be a string.", name)
	}
	return s, true, nil
}

func boolField(fields map[string]json.RawMessage, name string) (bool, *refusal.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, refusal.Field("invalid_request", name, "%s must be true or false.", name)
	}
	return b, nil
}

// secondsField reads an integer given as a JSON number or a string of digits (OpenAI's SDKs send "8").
func secondsField(fields map[string]json.RawMessage, name string) (int, bool, *refusal.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return 0, false, nil
	}
	bad := refusal.Field("invalid_seconds", name, "%s must be a whole number of seconds from %d to %d, as a number or a string of digits.", name, MinSeconds, MaxSeconds)
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

func urlList(fields map[string]json.RawMessage, name string) ([]string, *refusal.Error) {
	raw, ok := fields[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, refusal.Field("invalid_request", name, "%s must be an array of URL strings.", name)
	}
	out := make([]string, 0, len(list))
	for i, item := range list {
		var s string
		if err := json.Unmarshal(item, &s); err != nil {
			return nil, refusal.Field("invalid_media_url", fmt.Sprintf("%s[%d]", name, i), "%s[%d] must be a URL string.", name, i)
		}
		out = append(out, s)
	}
	return out, nil
}

// check accepts only URLs this platform signed, not expired. Whether the file belongs to the caller and
// still exists is checked in the create transaction (media.Service.Attach).
func (p MediaPolicy) check(field string, position int, param, raw string) (media.FieldRef, *refusal.Error) {
	how := "Upload the file with POST /uploads/v1/files or import it with POST /uploads/v1/import and use the url it returns."
	if raw == "" {
		return media.FieldRef{}, refusal.Field("invalid_media_url", param, "%s is empty. %s", param, how)
	}
	if len(raw) > maxURLBytes || !utf8.ValidString(raw) || strings.ContainsFunc(raw, unicode.IsControl) {
		return media.FieldRef{}, refusal.Field("invalid_media_url", param, "%s is not a media URL issued by this platform. %s", param, how)
	}
	ref, err := p.Signer.Parse(raw, p.now())
	switch {
	case errors.Is(err, media.ErrExpired):
		return media.FieldRef{}, refusal.Field("invalid_media_url", param, "%s expired at %s. Upload or import the file again to get a fresh URL.", param, ref.Expires.UTC().Format(time.RFC3339))
	case err != nil:
		return media.FieldRef{}, refusal.Field("invalid_media_url", param, "%s is not a media URL issued by this platform (only URLs from the media entry points are accepted, unchanged). %s", param, how)
	}
	return media.FieldRef{Field: field, Position: position, Param: param, Kind: media.FieldKind(field), ID: ref.ID}, nil
}

func (p MediaPolicy) now() time.Time { return p.Now() }

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
