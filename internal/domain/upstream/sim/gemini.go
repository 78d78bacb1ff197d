package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"videogen/internal/domain/upstream/gemini"
	"videogen/models"
)

// The Gemini API's protocol for Veo, as Google's Go SDK (google.golang.org/genai) sends it and the
// Gemini API's Veo page documents it (docs/upstreams.md#gemini): the simulator reads what the SDK puts
// in a predictLongRunning body, answers with long-running operations, and serves each video as a file
// of the API, downloaded with the key.
func (s *Sim) geminiMux() *http.ServeMux {
	m := http.NewServeMux()
	// {call} is "{model}:predictLongRunning": a path wildcard is a whole segment.
	m.HandleFunc("POST /v1beta/models/{call}", s.geminiAuthed(s.geminiCreate))
	m.HandleFunc("GET /v1beta/models/{model}/operations/{id}", s.geminiAuthed(s.geminiGet))
	// {file} is "{id}:download", with ?alt=media, as the operation's video URI names it.
	m.HandleFunc("GET /v1beta/files/{file}", s.geminiAuthed(s.geminiFile))
	// Where a file download redirects: a signed storage URL that takes no key, as the Gemini API's
	// download redirects (its REST examples download with curl -L, "follow redirects").
	m.HandleFunc("GET /files/{name}", s.arkFile)
	return m
}

// geminiErr writes the Gemini API's error body, google.rpc.Status in JSON: {"error":{code, message,
// status, details}}.
func geminiErr(w http.ResponseWriter, code int, status, msg string, details ...map[string]any) {
	e := map[string]any{"code": code, "message": msg, "status": status}
	if len(details) > 0 {
		e["details"] = details
	}
	writeJSON(w, code, map[string]any{"error": e})
}

// geminiKeyInvalid is the Gemini API's answer to an unknown key.
func geminiKeyInvalid(w http.ResponseWriter) {
	geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.",
		map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
			"domain": "googleapis.com", "metadata": map[string]string{"service": "generativelanguage.googleapis.com"}})
}

// geminiAuthed checks the x-goog-api-key header: unknown, or revoked by [sim:401], is answered as the
// Gemini API answers a bad key (400 API_KEY_INVALID); none at all, 403 PERMISSION_DENIED.
func (s *Sim) geminiAuthed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("x-goog-api-key")
		if key == "" {
			geminiErr(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
			return
		}
		own := owner(key)
		if !s.owners[own] || s.isRevoked(own) {
			geminiKeyInvalid(w)
			return
		}
		h(w, r, own)
	}
}

// geminiImage is an image as the SDK sends it to the Gemini API (imageToMldev): base64 bytes and type.
type geminiImage struct {
	BytesBase64Encoded string `json:"bytesBase64Encoded"`
	MIMEType           string `json:"mimeType"`
}

// geminiBody is a predictLongRunning body. Unknown fields are refused, as the Gemini API refuses them
// ("Invalid JSON payload received. Unknown name …"), so an adapter that sends more than Veo takes fails here.
type geminiBody struct {
	Instances []struct {
		Prompt          string       `json:"prompt"`
		Image           *geminiImage `json:"image"`
		LastFrame       *geminiImage `json:"lastFrame"`
		ReferenceImages []struct {
			Image         *geminiImage `json:"image"`
			ReferenceType string       `json:"referenceType"`
		} `json:"referenceImages"`
	} `json:"instances"`
	Parameters struct {
		AspectRatio      string `json:"aspectRatio"`
		Resolution       string `json:"resolution"`
		DurationSeconds  *int   `json:"durationSeconds"`
		NegativePrompt   string `json:"negativePrompt"`
		PersonGeneration string `json:"personGeneration"`
		SampleCount      *int   `json:"sampleCount"`
		EnhancePrompt    *bool  `json:"enhancePrompt"`
	} `json:"parameters"`
}

// geminiSizes is the size Veo renders for each resolution and aspect ratio.
var geminiSizes = map[string]string{"720p 16:9": "1280x720", "720p 9:16": "720x1280", "1080p 16:9": "1920x1080", "1080p 9:16": "1080x1920"}

// image decodes one inline image, refusing what Veo refuses: no bytes, or a type it does not read.
func (g *geminiImage) decode(what string) (int64, error) {
	if g == nil || g.BytesBase64Encoded == "" {
		return 0, fmt.Errorf("%s: bytesBase64Encoded is required", what)
	}
	if !slices.Contains([]string{"image/png", "image/jpeg", "image/webp"}, g.MIMEType) {
		return 0, fmt.Errorf("%s: mimeType %q is not supported", what, g.MIMEType)
	}
	b, err := base64.StdEncoding.DecodeString(g.BytesBase64Encoded)
	if err != nil || len(b) == 0 {
		return 0, fmt.Errorf("%s: bytesBase64Encoded is not base64", what)
	}
	return int64(len(b)), nil
}

func (s *Sim) geminiCreate(w http.ResponseWriter, r *http.Request, own string) {
	model, ok := strings.CutSuffix(r.PathValue("call"), ":predictLongRunning")
	if !ok || model == "" {
		geminiErr(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	row, known := gemini.Models[model]
	if !known {
		// The models the capability table lists are the ones this simulator serves, as the Gemini API
		// serves the ones its Veo page lists.
		geminiErr(w, http.StatusNotFound, "NOT_FOUND", "models/"+model+" is not found for API version v1beta, or is not supported for predictLongRunning.")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "The request body could not be read.")
		return
	}
	var b geminiBody
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received. "+err.Error())
		return
	}
	if len(b.Instances) != 1 {
		geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Exactly one instance is required.")
		return
	}
	in, p := b.Instances[0], b.Parameters
	prompt := in.Prompt
	if strings.Contains(prompt, Directive401) && s.revokeOnce(own, prompt) {
		geminiKeyInvalid(w)
		return
	}
	if strings.Contains(prompt, DirectiveReject) {
		geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Request contains an invalid argument. ([sim:reject])")
		return
	}
	// Veo's defaults for what the request leaves out, and the values it takes.
	ratio, res, secs := p.AspectRatio, p.Resolution, 8
	if ratio == "" {
		ratio = "16:9"
	}
	if res == "" {
		res = "720p"
	}
	if p.DurationSeconds != nil {
		secs = *p.DurationSeconds
	}
	size, ok := geminiSizes[res+" "+ratio]
	bad := func(msg string) { geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", msg) }
	switch {
	case !ok:
		bad(fmt.Sprintf("Unsupported aspect ratio %q or resolution %q.", ratio, res))
		return
	case prompt == "" && in.Image == nil:
		bad("A prompt or an image is required.")
		return
	}
	// What the model's row refuses (durations, sizes, inputs, rules), in Veo's words.
	ask := models.VideoRequest{Model: model, Prompt: prompt, Seconds: secs, Size: size}
	if in.Image != nil {
		ask.StartImageURL = "inline"
	}
	if in.LastFrame != nil {
		ask.EndImageURL = "inline"
	}
	for range in.ReferenceImages {
		ask.ImageURLs = append(ask.ImageURLs, "inline")
	}
	if refused := row.Refuse(res, ratio, ask); refused != nil {
		if refused.Param == "seconds" {
			bad(fmt.Sprintf("The value for `durationSeconds` is not supported for %s with this request: %s. Got %d.", model, refused.Message, secs))
		} else {
			bad(fmt.Sprintf("Unsupported request for %s: %s.", model, refused.Message))
		}
		return
	}
	var media []Media
	var fetched int64
	addImage := func(g *geminiImage, role string) error {
		n, err := g.decode(role)
		fetched += n
		media = append(media, Media{Role: role, URL: "inline:" + g.MIMEType})
		return err
	}
	if in.Image != nil {
		err = addImage(in.Image, "first_frame")
	}
	if err == nil && in.LastFrame != nil {
		err = addImage(in.LastFrame, "last_frame")
	}
	for _, ref := range in.ReferenceImages {
		if err == nil && !strings.EqualFold(ref.ReferenceType, "asset") {
			err = fmt.Errorf("referenceType %q is not supported", ref.ReferenceType)
		}
		if err == nil {
			err = addImage(ref.Image, "reference_image")
		}
	}
	if err != nil {
		bad(err.Error())
		return
	}
	d := s.cfg.Duration
	if strings.Contains(prompt, DirectiveSlow) {
		d *= 10
	}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	t := &Task{
		Model: model, Prompt: prompt, Seconds: secs, Size: size, Resolution: res, AspectRatio: ratio,
		GenerateAudio: true, Media: media, Duration: d, InputBytes: fetched, RequestDigest: digest,
		Fail: strings.Contains(prompt, DirectiveFail),
		// Veo refuses unsafe prompts and outputs in the operation, not at submission: it finishes
		// without a video, counting it in raiMediaFilteredCount.
		FailPolicy: strings.Contains(prompt, DirectiveFailPolicy) || strings.Contains(prompt, DirectivePolicy),
	}
	if strings.Contains(prompt, DirectiveAudioFilterOnce) && s.firstTime(own, DirectiveAudioFilterOnce, prompt) {
		t.Fail, t.FailPolicy, t.AudioFiltered = true, true, true
	}
	// The Gemini API has no idempotency key: as on Ark, [sim:5xx-once] answers 503 to the first
	// submission of a body, and its retry starts a second operation.
	lose := strings.Contains(prompt, Directive5xxOnce) && !s.answered5xx(own, digest)
	t, _, err = s.create(own, t)
	if errors.Is(err, errCapacity) {
		w.Header().Set("Retry-After", "1")
		geminiErr(w, http.StatusTooManyRequests, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).",
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"})
		return
	}
	if err != nil {
		s.cfg.Log.Error("simulator create", "err", err)
		geminiErr(w, http.StatusInternalServerError, "INTERNAL", "An internal error has occurred.")
		return
	}
	if lose {
		if err := s.markAnswered5xx(t); err == nil {
			geminiErr(w, http.StatusServiceUnavailable, "UNAVAILABLE", "The service is currently unavailable. ([sim:5xx-once])")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": operationName(t)})
}

// operationName is the task's operation as the Gemini API names Veo's: models/{model}/operations/{id}.
func operationName(t *Task) string { return "models/" + t.Model + "/operations/" + t.ID }

func (s *Sim) geminiGet(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok || t.Model != r.PathValue("model") {
		geminiErr(w, http.StatusNotFound, "NOT_FOUND", "Operation not found.")
		return
	}
	out := map[string]any{"name": operationName(t)}
	switch st, _ := t.state(s.cfg.Now()); st {
	case stCompleted:
		out["done"] = true
		out["response"] = map[string]any{
			"@type": "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
			"generateVideoResponse": map[string]any{"generatedSamples": []any{
				map[string]any{"video": map[string]string{"uri": geminiFileURI(r, t)}},
			}},
		}
	case stFailed:
		out["done"] = true
		if t.FailPolicy {
			reason := "Your prompt may violate our policies. ([sim:policy] or [sim:fail-policy])"
			if t.AudioFiltered {
				reason = "We encountered an issue with the audio for your prompt, which means we could not create your video. Support codes: 15236754 ([sim:audio-filter-once])"
			}
			out["response"] = map[string]any{
				"@type":                 "type.googleapis.com/google.ai.generativelanguage.v1beta.PredictLongRunningResponse",
				"generateVideoResponse": map[string]any{"raiMediaFilteredCount": 1, "raiMediaFilteredReasons": []string{reason}},
			}
		} else {
			out["error"] = map[string]any{"code": 13, "message": "Video generation failed. ([sim:fail])"}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// geminiFileURI is the task's video as a file of this simulator's API, as the client reached it:
// {base}/v1beta/files/{id}:download?alt=media. The SDK reads a file id as lowercase letters and digits.
func geminiFileURI(r *http.Request, t *Task) string {
	return (&url.URL{Scheme: "http", Host: r.Host, Path: "/v1beta/files/" + t.ID + ":download", RawQuery: "alt=media"}).String()
}

func (s *Sim) geminiFile(w http.ResponseWriter, r *http.Request, own string) {
	id, ok := strings.CutSuffix(r.PathValue("file"), ":download")
	if !ok || r.URL.Query().Get("alt") != "media" {
		geminiErr(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Only ?alt=media downloads are supported.")
		return
	}
	t, found := s.get(own, id)
	if !found {
		geminiErr(w, http.StatusNotFound, "NOT_FOUND", "File not found.")
		return
	}
	if st, _ := t.state(s.cfg.Now()); st != stCompleted {
		geminiErr(w, http.StatusNotFound, "NOT_FOUND", "File not found.")
		return
	}
	http.Redirect(w, r, s.fileURL(r, t, videoSuffix), http.StatusFound)
}
