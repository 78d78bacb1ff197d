package sim

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/models"
)

// Ark's protocol, as BytePlus ModelArk and Volcengine Ark document it (docs/upstreams.md#ark). The
// simulator reads the fields videogen's adapter sends and answers in Ark's shapes and codes.
func (s *Sim) arkMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /api/v3/contents/generations/tasks", s.authed(s.arkCreate))
	m.HandleFunc("GET /api/v3/contents/generations/tasks/{id}", s.authed(s.arkGet))
	m.HandleFunc("DELETE /api/v3/contents/generations/tasks/{id}", s.authed(s.arkDelete))
	// The video and last-frame URLs stand for Ark's presigned object-storage URLs: no credential, a
	// signature and an expiry in the query.
	m.HandleFunc("GET /files/{name}", s.arkFile)
	return m
}

// arkErr writes Ark's error body: {"error":{"code","message","param","type"}}, the message ending with
// a request id as Ark's do.
func arkErr(w http.ResponseWriter, status int, code, msg string) {
	typ := map[int]string{
		http.StatusBadRequest: "BadRequest", http.StatusUnauthorized: "Unauthorized", http.StatusForbidden: "Forbidden",
		http.StatusNotFound: "NotFound", http.StatusTooManyRequests: "TooManyRequests",
		http.StatusServiceUnavailable: "ServiceUnavailable",
	}[status]
	if typ == "" {
		typ = "InternalServiceError"
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{
		"code": code, "message": msg + " Request id: " + requestID(), "param": "", "type": typ,
	}})
}

func requestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "021" + hex.EncodeToString(b)
}

type arkURL struct {
	URL string `json:"url"`
}

// arkBody is a create request as Ark reads it. Pointers tell an absent field from its zero value,
// since Ark then applies its defaults.
type arkBody struct {
	Model   string `json:"model"`
	Content []struct {
		Type     string  `json:"type"`
		Text     string  `json:"text"`
		ImageURL *arkURL `json:"image_url"`
		VideoURL *arkURL `json:"video_url"`
		AudioURL *arkURL `json:"audio_url"`
		Role     string  `json:"role"`
	} `json:"content"`
	Resolution    string `json:"resolution"`
	Ratio         string `json:"ratio"`
	Duration      *int   `json:"duration"`
	GenerateAudio *bool  `json:"generate_audio"`
	Watermark     *bool  `json:"watermark"`
	Seed          *int64 `json:"seed"`
	// ReturnLastFrame asks for content.last_frame_url; ExecutionExpiresAfter bounds how long the task
	// may take (seconds, 3600 to 259200; default 172800), after which it ends expired.
	ReturnLastFrame       *bool  `json:"return_last_frame"`
	ExecutionExpiresAfter *int64 `json:"execution_expires_after"`
}

// Ark's bounds and default for execution_expires_after, in seconds (BytePlus ModelArk, "Create a video
// generation task").
const (
	arkMinExpiresAfter     = 3600
	arkMaxExpiresAfter     = 259200
	arkDefaultExpiresAfter = 172800
)

// parse reads the content array: the prompt and the media with their roles, refused as Seedance 2.0
// refuses them (an unknown type or role; frames mixed with references; a last frame alone; reference
// audio without a reference image or video).
func (b arkBody) parse() (prompt string, media []Media, err error) {
	var texts []string
	frames, visual, audio := 0, 0, 0
	hasFirst, hasLast := false, false
	for i, c := range b.Content {
		bad := func(what string) error { return fmt.Errorf("content[%d]: %s", i, what) }
		switch c.Type {
		case "text":
			texts = append(texts, c.Text)
		case "image_url":
			if c.ImageURL == nil || c.ImageURL.URL == "" {
				return "", nil, bad("image_url.url is required")
			}
			switch c.Role {
			case "", "first_frame":
				frames++
				hasFirst = true
				c.Role = "first_frame"
			case "last_frame":
				frames++
				hasLast = true
			case "reference_image":
				visual++
			default:
				return "", nil, bad("role " + c.Role + " is not valid for image_url")
			}
			media = append(media, Media{Role: c.Role, URL: c.ImageURL.URL})
		case "video_url":
			if c.VideoURL == nil || c.VideoURL.URL == "" || c.Role != "reference_video" {
				return "", nil, bad("video_url needs video_url.url and role reference_video")
			}
			visual++
			media = append(media, Media{Role: c.Role, URL: c.VideoURL.URL})
		case "audio_url":
			if c.AudioURL == nil || c.AudioURL.URL == "" || c.Role != "reference_audio" {
				return "", nil, bad("audio_url needs audio_url.url and role reference_audio")
			}
			audio++
			media = append(media, Media{Role: c.Role, URL: c.AudioURL.URL})
		default:
			return "", nil, bad("type " + strconv.Quote(c.Type) + " is not supported")
		}
	}
	switch {
	case frames > 0 && visual+audio > 0:
		return "", nil, errors.New("first or last frames cannot be combined with reference media")
	case hasLast && !hasFirst:
		return "", nil, errors.New("a last_frame needs a first_frame")
	case audio > 0 && visual == 0:
		return "", nil, errors.New("reference audio needs a reference image or video")
	case len(texts) == 0 && len(media) == 0:
		return "", nil, errors.New("content is empty")
	}
	return strings.Join(texts, "\n"), media, nil
}

// sizeOf is the output size for a resolution and ratio: the size of a catalog model of that resolution.
func sizeOf(resolution, ratio string) (string, bool) {
	for _, m := range catalog.Models {
		if m.Resolution == resolution {
			return m.Size(ratio)
		}
	}
	return "", false
}

func (s *Sim) arkCreate(w http.ResponseWriter, r *http.Request, own string) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The request body could not be read.")
		return
	}
	var b arkBody
	if err := json.Unmarshal(raw, &b); err != nil {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The request body is not valid JSON: "+err.Error())
		return
	}
	if b.Model == "" {
		arkErr(w, http.StatusBadRequest, "MissingParameter", "The request failed because it is missing one or multiple required parameters: model.")
		return
	}
	row, known := ark.Models[b.Model]
	if !known {
		// The models the capability table lists are the ones this simulator serves.
		arkErr(w, http.StatusNotFound, "InvalidEndpointOrModel.NotFound", "The model or endpoint "+b.Model+" does not exist or you do not have access to it.")
		return
	}
	prompt, media, err := b.parse()
	if err != nil {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter content specified in the request is not valid: "+err.Error()+".")
		return
	}
	if strings.Contains(prompt, Directive401) && s.revokeOnce(own, prompt) {
		arkErr(w, http.StatusUnauthorized, "AuthenticationError", "The API key in the request is missing or invalid ([sim:401] revoked it).")
		return
	}
	if strings.Contains(prompt, DirectivePolicy) {
		arkErr(w, http.StatusBadRequest, "InputTextSensitiveContentDetected", "The request failed because the input text may contain sensitive information. ([sim:policy])")
		return
	}
	if strings.Contains(prompt, DirectiveReject) {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "One or more parameters specified in the request are not valid ([sim:reject]).")
		return
	}
	if strings.Contains(prompt, DirectiveSetLimit) {
		arkErr(w, http.StatusTooManyRequests, "SetLimitExceeded", `Your account [2100000000] has reached the set inference limit for the [`+b.Model+`] model, and the model service has been paused. To continue using this model, please visit the Model Activation page to adjust or close the "Safe Experience Mode".`)
		return
	}
	// Ark's defaults for what the request leaves out.
	res, ratio, secs := b.Resolution, b.Ratio, 5
	if res == "" {
		res = "720p"
	}
	if ratio == "" || ratio == "adaptive" {
		ratio = "16:9"
	}
	if b.Duration != nil && *b.Duration != -1 {
		secs = *b.Duration
	}
	size, ok := sizeOf(res, ratio)
	if !ok {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter resolution or ratio specified in the request is not valid.")
		return
	}
	if secs < 1 || secs > 60 {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter duration specified in the request is not valid.")
		return
	}
	expires := int64(arkDefaultExpiresAfter)
	if b.ExecutionExpiresAfter != nil {
		expires = *b.ExecutionExpiresAfter
	}
	if expires < arkMinExpiresAfter || expires > arkMaxExpiresAfter {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The parameter execution_expires_after specified in the request is not valid.")
		return
	}
	audio, watermark := true, false
	if b.GenerateAudio != nil {
		audio = *b.GenerateAudio
	}
	if b.Watermark != nil {
		watermark = *b.Watermark
	}
	fetched, probes, err := probeInputs(r.Context(), media)
	if err != nil {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", "The simulator could not fetch an input: "+err.Error()+".")
		return
	}
	// What the model's row refuses (durations, resolutions, inputs and their limits, sound, rules), as
	// Ark refuses it: a 400 InvalidParameter naming the parameter.
	ask := models.VideoRequest{Model: b.Model, Prompt: prompt, Seconds: secs, Size: size, GenerateAudio: audio}
	ask.Media = probes
	for _, m := range media {
		switch roleField[m.Role] {
		case "start_image_url":
			ask.StartImageURL = m.URL
		case "end_image_url":
			ask.EndImageURL = m.URL
		case "image_urls":
			ask.ImageURLs = append(ask.ImageURLs, m.URL)
		case "video_urls":
			ask.VideoURLs = append(ask.VideoURLs, m.URL)
		case "audio_urls":
			ask.AudioURLs = append(ask.AudioURLs, m.URL)
		}
	}
	if refused := row.Refuse(res, ratio, ask); refused != nil {
		arkErr(w, http.StatusBadRequest, "InvalidParameter", fmt.Sprintf("The parameter `%s` specified in the request is not valid for model %s: %s.", refused.Param, b.Model, refused.Message))
		return
	}
	d := s.cfg.Duration
	if strings.Contains(prompt, DirectiveSlow) {
		d *= 10
	}
	sum := sha256.Sum256(raw)
	digest := hex.EncodeToString(sum[:])
	t := &Task{
		Model: b.Model, Prompt: prompt, Seconds: secs, Size: size, Resolution: res, AspectRatio: ratio,
		GenerateAudio: audio, Watermark: watermark, Seed: b.Seed, Media: media, Duration: d,
		Fail: strings.Contains(prompt, DirectiveFail), FailPolicy: strings.Contains(prompt, DirectiveFailPolicy),
		InputBytes: fetched, RequestDigest: digest,
		LastFrame: b.ReturnLastFrame != nil && *b.ReturnLastFrame, ExpiresAfter: time.Duration(expires) * time.Second,
	}
	// Ark has no idempotency key, so the retry of a submission whose answer was lost is a new task:
	// [sim:5xx-once] answers 503 to the first submission of a body and accepts its retries.
	lose := strings.Contains(prompt, Directive5xxOnce) && !s.answered5xx(own, digest)
	t, _, err = s.create(own, t)
	if errors.Is(err, errCapacity) {
		w.Header().Set("Retry-After", "1")
		arkErr(w, http.StatusTooManyRequests, "QuotaExceeded", "The request has exceeded the quota.")
		return
	}
	if err != nil {
		s.cfg.Log.Error("simulator create", "err", err)
		arkErr(w, http.StatusInternalServerError, "InternalServiceError", "The service encountered an unexpected internal error.")
		return
	}
	if lose {
		if err := s.markAnswered5xx(t); err == nil {
			arkErr(w, http.StatusServiceUnavailable, "ServiceUnavailable", "Simulated 503 after accepting the task ([sim:5xx-once]).")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": t.ID})
}

// Ark's names for the simulated states.
var arkStatus = map[string]string{stQueued: "queued", stInProgress: "running", stCompleted: "succeeded", stFailed: "failed",
	stCancelled: "cancelled", stExpired: "expired"}

// arkTokens is Seedance's usage for a video: width × height × frames / 1024, with frames = 24 × seconds
// + 1 (BytePlus documents width × height × fps × seconds / 1024; the +1 is what its example answers
// report: 108900 tokens for 5 s of 1280x720).
func arkTokens(width, height, seconds int) int64 {
	return int64(width) * int64(height) * int64(fps*seconds+1) / 1024
}

func (s *Sim) arkGet(w http.ResponseWriter, r *http.Request, own string) {
	id := r.PathValue("id")
	t, ok := s.get(own, id)
	if !ok {
		arkErr(w, http.StatusNotFound, "ResourceNotFound", "The specified task "+id+" is not found.")
		return
	}
	now := s.cfg.Now()
	st, _ := t.state(now)
	out := map[string]any{
		"id": t.ID, "model": t.Model, "status": arkStatus[st], "error": nil,
		"created_at": t.CreatedAt.Unix(), "updated_at": t.changedAt(now).Unix(),
		"seed": t.renderSeed(), "resolution": t.Resolution, "ratio": t.AspectRatio, "duration": t.Seconds,
		"framespersecond": fps, "generate_audio": t.GenerateAudio, "service_tier": "default",
		"execution_expires_after": int64(t.ExpiresAfter / time.Second),
	}
	switch st {
	case stCompleted:
		wd, ht, _ := parseSize(t.Size)
		tokens := arkTokens(wd, ht, t.Seconds)
		content := map[string]string{"video_url": s.fileURL(r, t, videoSuffix)}
		if t.LastFrame {
			content["last_frame_url"] = s.fileURL(r, t, lastFrameSuffix)
		}
		out["content"] = content
		out["usage"] = map[string]int64{"completion_tokens": tokens, "total_tokens": tokens}
	case stFailed:
		code, msg := "InternalServiceError", "The service encountered an unexpected internal error ([sim:fail])."
		if t.FailPolicy {
			code, msg = "OutputVideoSensitiveContentDetected", "The request failed because the output video may contain sensitive information ([sim:fail-policy])."
		}
		out["error"] = map[string]string{"code": code, "message": msg + " Request id: " + requestID()}
	}
	writeJSON(w, http.StatusOK, out)
}

// arkDelete cancels or deletes a task as Ark's DELETE does in each state: a queued task is cancelled
// (and frees its place); a finished one (succeeded, failed, expired) is deleted and no longer found,
// its files with it; a running or cancelled one cannot be, and is refused with the common error code
// for an operation its target's phase does not allow.
func (s *Sim) arkDelete(w http.ResponseWriter, r *http.Request, own string) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.Owner != own {
		arkErr(w, http.StatusNotFound, "ResourceNotFound", "The specified task "+id+" is not found.")
		return
	}
	now := s.cfg.Now()
	switch st, _ := t.state(now); st {
	case stQueued:
		// A copy replaces the task: handlers that already hold it read it without the lock.
		c := *t
		c.CancelledAt = &now
		if err := s.save(&c); err != nil {
			s.cfg.Log.Error("simulator cancel", "err", err)
			arkErr(w, http.StatusInternalServerError, "InternalServiceError", "The service encountered an unexpected internal error.")
			return
		}
		s.tasks[id] = &c
	case stInProgress, stCancelled:
		arkErr(w, http.StatusForbidden, "OperationDenied.UnsupportedPhase",
			"Operation is denied because operation is not supported while the target is in its current phase: "+arkStatus[st]+".")
		return
	default:
		if err := os.Remove(filepath.Join(s.taskDir(), id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.cfg.Log.Error("simulator delete", "err", err)
			arkErr(w, http.StatusInternalServerError, "InternalServiceError", "The service encountered an unexpected internal error.")
			return
		}
		s.removeOutputs(id)
		delete(s.tasks, id)
	}
	writeJSON(w, http.StatusOK, map[string]any{})
}

// The files a task's presigned URLs name: its video, and the last frame it returns when asked.
const (
	videoSuffix     = ".mp4"
	lastFrameSuffix = ".last_frame.png"
)

// fileURL is the presigned URL of one of the task's files on this simulator, as the client reached it.
// Like Ark's, it is valid for Keep after the task finished (Ark: 24 hours), and carries its expiry and
// a signature over the task, the file and the expiry.
func (s *Sim) fileURL(r *http.Request, t *Task, suffix string) string {
	exp := strconv.FormatInt(t.endsAt().Add(s.cfg.Keep).Unix(), 10)
	q := url.Values{"exp": {exp}, "sig": {s.sign(t.ID+suffix, exp)}}
	return (&url.URL{Scheme: "http", Host: r.Host, Path: "/files/" + t.ID + suffix, RawQuery: q.Encode()}).String()
}

func (s *Sim) sign(name, exp string) string {
	m := hmac.New(sha256.New, s.urlKey)
	m.Write([]byte(name + "\n" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

// arkFile serves a presigned video or last-frame URL. Like object storage, it refuses a bad or stale
// signature with 403 and knows nothing of credentials.
func (s *Sim) arkFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	suffix := videoSuffix
	if strings.HasSuffix(name, lastFrameSuffix) {
		suffix = lastFrameSuffix
	}
	id, ok := strings.CutSuffix(name, suffix)
	exp, sig := r.URL.Query().Get("exp"), r.URL.Query().Get("sig")
	expAt, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || !hmac.Equal([]byte(sig), []byte(s.sign(name, exp))) {
		http.Error(w, "AccessDenied: the signature does not match", http.StatusForbidden)
		return
	}
	if !s.cfg.Now().Before(time.Unix(expAt, 0)) {
		http.Error(w, "AccessDenied: the request has expired", http.StatusForbidden)
		return
	}
	t, ok := s.byID(id)
	if !ok || (suffix == lastFrameSuffix && !t.LastFrame) {
		http.Error(w, "NoSuchKey", http.StatusNotFound)
		return
	}
	if st, _ := t.state(s.cfg.Now()); st != stCompleted {
		http.Error(w, "NoSuchKey", http.StatusNotFound)
		return
	}
	fail := func(status int, msg string) { http.Error(w, msg, status) }
	if suffix == lastFrameSuffix {
		s.serveFile(w, t, "image/png", lastFrameSuffix, renderLastFrame, fail)
		return
	}
	s.serveVideo(w, t, fail)
}

// renderLastFrame draws the video's last frame at its size as a PNG, from the frames the video shows
// (mp4synth.Frame), as Ark returns the last frame of what it rendered.
func renderLastFrame(t *Task, f io.Writer) error {
	p, err := t.params()
	if err != nil {
		return err
	}
	img, err := mp4synth.Frame(p, p.Seconds*p.FPS-1, p.Width, p.Height)
	if err != nil {
		return err
	}
	return png.Encode(f, img)
}
