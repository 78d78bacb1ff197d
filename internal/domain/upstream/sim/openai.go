package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"videogen/internal/domain/stills"
	"videogen/internal/domain/upstream/openai"
	"videogen/internal/infra/mediaprobe"
	"videogen/models"
)

// OpenAI's Videos API as its spec has it (openai/openai-openapi openapi.yaml, kept in
// internal/domain/upstream/openai/testdata): CreateVideoJsonBody and CreateVideoMultipartBody take
// model, prompt, input_reference, seconds and size; nothing else.
var (
	openaiSeconds = []string{"4", "8", "12"} // VideoSeconds
	openaiSizes   = []string{"720x1280", "1280x720", "1024x1792", "1792x1024"}
	openaiFields  = []string{"model", "prompt", "input_reference", "seconds", "size"}
	// input_reference's file types, as OpenAI's video generation guide lists them.
	openaiImageTypes = []string{"image/jpeg", "image/png", "image/webp"}
)

// The spec's defaults, for fields a create leaves out.
const (
	openaiDefaultModel   = "sora-2"
	openaiDefaultSeconds = "4"
	openaiDefaultSize    = "720x1280"
	openaiMaxPrompt      = 32000
	openaiMaxUpload      = 50 << 20
)

func (s *Sim) openaiMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/videos", s.authed(s.openaiCreate))
	m.HandleFunc("GET /v1/videos/{id}", s.authed(s.openaiGet))
	m.HandleFunc("GET /v1/videos/{id}/content", s.authed(s.openaiContent))
	return m
}

// openaiErr writes OpenAI's error body (ErrorResponse) with no param.
func openaiErr(w http.ResponseWriter, status int, code, msg string) {
	openaiParamErr(w, status, code, "", msg)
}

// openaiParamErr writes OpenAI's error body naming the parameter at fault; an empty code or param is
// null, as OpenAI sends them.
func openaiParamErr(w http.ResponseWriter, status int, code, param, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status >= 500:
		typ = "server_error"
	}
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": nullable(code), "message": msg, "type": typ, "param": nullable(param)}})
}

// refusal is a 400 as OpenAI words it.
type refusal struct{ code, param, msg string }

func (r *refusal) Error() string { return r.msg }

func unknownParam(name string) *refusal {
	return &refusal{"unknown_parameter", name, fmt.Sprintf("Unknown parameter: '%s'.", name)}
}

// enumValue checks a string parameter against its enum, in OpenAI's words.
func enumValue(name, v string, allowed []string) *refusal {
	if slices.Contains(allowed, v) {
		return nil
	}
	return &refusal{"invalid_value", name, fmt.Sprintf("Invalid value: '%s'. Supported values are: %s.", v, quotedList(allowed))}
}

func quotedList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + ", and " + q[len(q)-1]
}

// createForm is the create as OpenAI reads it: JSON or multipart, with defaults for what is left out.
type createForm struct {
	Model, Prompt, Seconds, Size string
	ImageURL                     string  // input_reference.image_url (JSON)
	Upload                       *Upload // input_reference as a file part (multipart)
}

func (c *createForm) check() *refusal {
	if c.Prompt == "" {
		return &refusal{"missing_required_parameter", "prompt", "Missing required parameter: 'prompt'."}
	}
	if utf8.RuneCountInString(c.Prompt) > openaiMaxPrompt {
		return &refusal{"string_above_max_length", "prompt", fmt.Sprintf("Invalid 'prompt': string too long. Expected a string with maximum length %d.", openaiMaxPrompt)}
	}
	if c.Model == "" {
		c.Model = openaiDefaultModel
	}
	if c.Seconds == "" {
		c.Seconds = openaiDefaultSeconds
	}
	if c.Size == "" {
		c.Size = openaiDefaultSize
	}
	if r := enumValue("seconds", c.Seconds, openaiSeconds); r != nil {
		return r
	}
	return enumValue("size", c.Size, openaiSizes)
}

// readJSONCreate reads CreateVideoJsonBody, refusing unknown fields and wrong types as OpenAI does.
func readJSONCreate(r io.Reader) (*createForm, *refusal) {
	var fields map[string]json.RawMessage
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&fields); err != nil {
		return nil, &refusal{"invalid_json", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly.)"}
	}
	for name := range fields {
		if !slices.Contains(openaiFields, name) {
			return nil, unknownParam(name)
		}
	}
	c := &createForm{}
	str := func(name string, dst *string, enum []string) *refusal {
		raw, ok := fields[name]
		if !ok || string(raw) == "null" {
			return nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			want := "a string"
			if enum != nil {
				want = "one of " + strings.Replace(quotedList(enum), ", and ", ", or ", 1)
			}
			return &refusal{"invalid_type", name, fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", name, want, jsonKind(raw))}
		}
		return nil
	}
	for _, f := range []struct {
		name string
		dst  *string
		enum []string
	}{{"model", &c.Model, nil}, {"prompt", &c.Prompt, nil}, {"seconds", &c.Seconds, openaiSeconds}, {"size", &c.Size, openaiSizes}} {
		if r := str(f.name, f.dst, f.enum); r != nil {
			return nil, r
		}
	}
	if raw, ok := fields["input_reference"]; ok && string(raw) != "null" {
		// ImageRefParam: exactly one of image_url and file_id.
		var ref map[string]json.RawMessage
		if err := json.Unmarshal(raw, &ref); err != nil {
			return nil, &refusal{"invalid_type", "input_reference", fmt.Sprintf("Invalid type for 'input_reference': expected an object, but got %s instead.", jsonKind(raw))}
		}
		for name := range ref {
			if name != "image_url" && name != "file_id" {
				return nil, unknownParam("input_reference." + name)
			}
		}
		if _, ok := ref["file_id"]; ok {
			return nil, &refusal{"invalid_value", "input_reference.file_id", "The simulator keeps no files: send input_reference.image_url or upload the image."}
		}
		if err := json.Unmarshal(ref["image_url"], &c.ImageURL); err != nil || c.ImageURL == "" {
			return nil, &refusal{"missing_required_parameter", "input_reference.image_url", "Missing required parameter: 'input_reference.image_url'."}
		}
	}
	return c, nil
}

func jsonKind(raw json.RawMessage) string {
	switch t := strings.TrimSpace(string(raw)); {
	case strings.HasPrefix(t, `"`):
		return "a string"
	case strings.HasPrefix(t, "{"):
		return "an object"
	case strings.HasPrefix(t, "["):
		return "an array"
	case t == "true" || t == "false":
		return "a boolean"
	case strings.ContainsAny(t, ".eE"):
		return "a decimal"
	default:
		return "an integer"
	}
}

// readMultipartCreate reads CreateVideoMultipartBody part by part: input_reference is hashed as it
// arrives, never held whole.
func readMultipartCreate(r *http.Request) (*createForm, *refusal) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, &refusal{"invalid_request", "", "Could not parse multipart form: " + err.Error()}
	}
	c := &createForm{}
	seen := map[string]bool{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, &refusal{"invalid_request", "", "Could not parse multipart form: " + err.Error()}
		}
		name := p.FormName()
		if !slices.Contains(openaiFields, name) {
			return nil, unknownParam(name)
		}
		if seen[name] {
			return nil, &refusal{"invalid_request", name, fmt.Sprintf("Duplicate parameter: '%s'.", name)}
		}
		seen[name] = true
		if name == "input_reference" {
			if p.FileName() == "" {
				return nil, &refusal{"invalid_type", name, "Invalid type for 'input_reference': expected a file, but got a string instead."}
			}
			ctype, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
			if !slices.Contains(openaiImageTypes, ctype) {
				return nil, &refusal{"invalid_value", name, fmt.Sprintf("Invalid file format for 'input_reference': '%s'. Supported formats are: %s.", ctype, quotedList(openaiImageTypes))}
			}
			h := sha256.New()
			probe := mediaprobe.Start(ctype)
			var sink io.Writer = h
			if probe != nil {
				sink = io.MultiWriter(h, probe)
			}
			n, err := io.Copy(sink, io.LimitReader(p, openaiMaxUpload+1))
			seen := probe.Finish()
			if err != nil {
				return nil, &refusal{"invalid_request", name, "Could not read the uploaded file: " + err.Error()}
			}
			if n == 0 || n > openaiMaxUpload {
				return nil, &refusal{"invalid_value", name, fmt.Sprintf("Invalid 'input_reference': the file must hold 1 to %d bytes.", openaiMaxUpload)}
			}
			c.Upload = &Upload{Filename: p.FileName(), ContentType: ctype, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil)), Width: seen.Width, Height: seen.Height}
			continue
		}
		b, err := io.ReadAll(io.LimitReader(p, 4*openaiMaxPrompt+1))
		if err != nil {
			return nil, &refusal{"invalid_request", name, "Could not read the form: " + err.Error()}
		}
		switch v := string(b); name {
		case "model":
			c.Model = v
		case "prompt":
			c.Prompt = v
		case "seconds":
			c.Seconds = v
		case "size":
			c.Size = v
		}
	}
	return c, nil
}

func (s *Sim) openaiCreate(w http.ResponseWriter, r *http.Request, own string) {
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var c *createForm
	var bad *refusal
	switch ctype {
	case "application/json":
		c, bad = readJSONCreate(r.Body)
	case "multipart/form-data":
		c, bad = readMultipartCreate(r)
	default:
		bad = &refusal{"invalid_request", "", fmt.Sprintf("Unsupported content type: '%s'. This endpoint takes application/json or multipart/form-data.", ctype)}
	}
	if bad == nil {
		bad = c.check()
	}
	if bad != nil {
		openaiParamErr(w, http.StatusBadRequest, bad.code, bad.param, bad.msg)
		return
	}
	if strings.Contains(c.Prompt, Directive401) && s.revokeOnce(own, c.Prompt) {
		openaiErr(w, http.StatusUnauthorized, "invalid_api_key", "the simulator revoked this credential as the prompt asked ([sim:401])")
		return
	}
	// What the model's row refuses, in OpenAI's words: a model it does not list is not found, a size
	// or duration outside its row is an invalid value, and a first frame of another size than the
	// video's is refused as Sora refuses it.
	row, known := openai.Models[c.Model]
	if !known {
		openaiErr(w, http.StatusNotFound, "model_not_found", fmt.Sprintf("The model '%s' does not exist or you do not have access to it.", c.Model))
		return
	}
	secs, _ := strconv.Atoi(c.Seconds)
	ask := models.VideoRequest{Model: c.Model, Prompt: c.Prompt, Seconds: secs, Size: c.Size}
	if c.Upload != nil || c.ImageURL != "" {
		ask.StartImageURL = "input_reference"
	}
	if refused := row.Refuse("", "", ask); refused != nil {
		openaiParamErr(w, http.StatusBadRequest, "invalid_value", refused.Param, fmt.Sprintf("Invalid value for '%s': %s.", refused.Param, refused.Message))
		return
	}
	if u := c.Upload; u != nil && u.Width > 0 && fmt.Sprintf("%dx%d", u.Width, u.Height) != c.Size {
		openaiParamErr(w, http.StatusBadRequest, "invalid_value", "input_reference", "Inpaint image must match the requested width and height")
		return
	}
	if strings.Contains(c.Prompt, DirectivePolicy) {
		openaiErr(w, http.StatusBadRequest, "moderation_blocked", "Your request was blocked by our moderation system. ([sim:policy])")
		return
	}
	if strings.Contains(c.Prompt, DirectiveReject) {
		openaiErr(w, http.StatusBadRequest, "invalid_request", "the simulator refuses the parameters of prompts containing [sim:reject]")
		return
	}
	var media []Media
	if c.ImageURL != "" {
		media = []Media{{Role: "first_frame", URL: c.ImageURL}}
	}
	fetched, err := fetchInputs(r.Context(), media)
	if err != nil {
		openaiParamErr(w, http.StatusBadRequest, "invalid_value", "input_reference.image_url", "the simulator could not fetch input_reference.image_url: "+err.Error())
		return
	}
	if c.Upload != nil {
		fetched += c.Upload.Bytes
	}
	d := s.cfg.Duration
	if strings.Contains(c.Prompt, DirectiveSlow) {
		d *= 10
	}
	t := &Task{
		IdemKey: r.Header.Get("Idempotency-Key"), Model: c.Model, Prompt: c.Prompt, Seconds: secs, Size: c.Size,
		// Sora renders sound with every video, and its size sets the ratio.
		GenerateAudio: true, Media: media, InputReference: c.Upload, InputBytes: fetched, Duration: d,
		Fail: strings.Contains(c.Prompt, DirectiveFail), FailPolicy: strings.Contains(c.Prompt, DirectiveFailPolicy),
	}
	t, isNew, err := s.create(own, t)
	if errors.Is(err, errCapacity) {
		w.Header().Set("Retry-After", "1")
		openaiErr(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached: this credential runs its maximum number of video jobs.")
		return
	}
	if err != nil {
		s.cfg.Log.Error("simulator create", "err", err)
		openaiErr(w, http.StatusInternalServerError, "", "The server had an error while processing your request. Sorry about that!")
		return
	}
	if isNew && strings.Contains(c.Prompt, Directive5xxOnce) {
		// Accepted, but the answer is lost: the client must retry with the same key and find this task.
		if err := s.markAnswered5xx(t); err == nil {
			openaiErr(w, http.StatusServiceUnavailable, "", "The server is overloaded or not ready yet. (simulated 503 after accepting the job)")
			return
		}
	}
	s.openaiVideo(w, t)
}

func (s *Sim) openaiGet(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		openaiNotFound(w, r.PathValue("id"))
		return
	}
	s.openaiVideo(w, t)
}

func openaiNotFound(w http.ResponseWriter, id string) {
	openaiErr(w, http.StatusNotFound, "", fmt.Sprintf("Video with id '%s' not found.", id))
}

// openaiVideo writes the Video object (VideoResource): every field the spec requires, null where the
// spec allows it and the job has no value yet.
func (s *Sim) openaiVideo(w http.ResponseWriter, t *Task) {
	now := s.cfg.Now()
	status, progress := t.state(now)
	out := map[string]any{
		"id": t.ID, "object": "video", "model": t.Model, "status": status, "progress": progress,
		"created_at": t.CreatedAt.Unix(), "completed_at": nil, "expires_at": nil, "prompt": t.Prompt,
		"size": t.Size, "seconds": strconv.Itoa(t.Seconds), "remixed_from_video_id": nil, "error": nil,
	}
	switch status {
	case stCompleted:
		out["completed_at"] = t.endsAt().Unix()
		out["expires_at"] = t.endsAt().Add(s.cfg.Keep).Unix()
	case stFailed:
		out["completed_at"] = t.endsAt().Unix()
		if t.FailPolicy {
			out["error"] = map[string]string{"code": "moderation_blocked", "message": "Your request was blocked by our moderation system. ([sim:fail-policy])"}
		} else {
			out["error"] = map[string]string{"code": "video_generation_failed", "message": "the simulator failed this job as its prompt asked ([sim:fail])"}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) openaiContent(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		openaiNotFound(w, r.PathValue("id"))
		return
	}
	variant := r.URL.Query().Get("variant")
	if variant == "" {
		variant = "video"
	}
	if bad := enumValue("variant", variant, []string{"video", stills.Thumbnail, stills.Spritesheet}); bad != nil {
		openaiParamErr(w, http.StatusBadRequest, bad.code, bad.param, bad.msg)
		return
	}
	if st, _ := t.state(s.cfg.Now()); st != stCompleted {
		openaiErr(w, http.StatusConflict, "video_not_ready", fmt.Sprintf("Video '%s' is %s; its content is available once it is completed.", t.ID, st))
		return
	}
	fail := func(status int, msg string) { openaiErr(w, status, "", msg) }
	if variant == "video" {
		s.serveVideo(w, t, fail)
		return
	}
	s.serveStill(w, t, variant, fail)
}
