package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"videogen/internal/domain/stills"
	"videogen/models"
)

// videogenMux answers the platform's own protocol, which kind sim speaks (internal/domain/upstream/httpapi):
// OpenAI's /v1/videos paths with the platform's whole video request as the body — aspect ratio, audio,
// watermark, seed and every media input — so that the built-in simulator renders the whole catalog.
func (s *Sim) videogenMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/videos", s.authed(s.videogenCreate))
	m.HandleFunc("GET /v1/videos/{id}", s.authed(s.videogenGet))
	m.HandleFunc("GET /v1/videos/{id}/content", s.authed(s.videogenContent))
	return m
}

// videogenBody is the platform's video request as the simulator reads it; seconds may come as a number
// or as a string of digits, as from OpenAI's SDKs.
type videogenBody struct {
	models.VideoRequest
	Seconds json.RawMessage `json:"seconds"`
}

func (b videogenBody) media() []Media {
	var out []Media
	add := func(role string, urls ...string) {
		for _, u := range urls {
			if u != "" {
				out = append(out, Media{Role: role, URL: u})
			}
		}
	}
	add("first_frame", b.StartImageURL)
	add("last_frame", b.EndImageURL)
	add("reference_image", b.ImageURLs...)
	add("reference_video", b.VideoURLs...)
	add("reference_audio", b.AudioURLs...)
	return out
}

func (s *Sim) videogenCreate(w http.ResponseWriter, r *http.Request, own string) {
	var b videogenBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
		openaiErr(w, http.StatusBadRequest, "invalid_json", err.Error())
		return
	}
	if strings.Contains(b.Prompt, Directive401) && s.revokeOnce(own, b.Prompt) {
		openaiErr(w, http.StatusUnauthorized, "invalid_api_key", "the simulator revoked this credential as the prompt asked ([sim:401])")
		return
	}
	secs, err := strconv.Atoi(strings.Trim(string(b.Seconds), `"`))
	if err != nil || secs < 1 || secs > 60 {
		openaiErr(w, http.StatusBadRequest, "invalid_seconds", "seconds must be 1..60")
		return
	}
	if _, _, err := parseSize(b.Size); err != nil {
		openaiErr(w, http.StatusBadRequest, "invalid_size", err.Error())
		return
	}
	if strings.Contains(b.Prompt, DirectivePolicy) {
		openaiErr(w, http.StatusBadRequest, "moderation_blocked", "Your request was blocked by our moderation system. ([sim:policy])")
		return
	}
	if strings.Contains(b.Prompt, DirectiveReject) {
		openaiErr(w, http.StatusBadRequest, "invalid_request", "the simulator refuses the parameters of prompts containing [sim:reject]")
		return
	}
	media := b.media()
	fetched, err := fetchInputs(r.Context(), media)
	if err != nil {
		openaiErr(w, http.StatusBadRequest, "invalid_media", "the simulator could not fetch an input: "+err.Error())
		return
	}
	d := s.cfg.Duration
	if strings.Contains(b.Prompt, DirectiveSlow) {
		d *= 10
	}
	t := &Task{
		IdemKey: r.Header.Get("Idempotency-Key"), Model: b.Model, Prompt: b.Prompt, Seconds: secs, Size: b.Size,
		AspectRatio: b.AspectRatio, GenerateAudio: b.GenerateAudio, Watermark: b.Watermark, Seed: b.Seed, Media: media,
		Duration: d, Fail: strings.Contains(b.Prompt, DirectiveFail), FailPolicy: strings.Contains(b.Prompt, DirectiveFailPolicy),
		InputBytes: fetched,
	}
	t, isNew, err := s.create(own, t)
	if errors.Is(err, errCapacity) {
		w.Header().Set("Retry-After", "1")
		openaiErr(w, http.StatusTooManyRequests, "concurrency_limit", "this credential runs its maximum number of tasks")
		return
	}
	if err != nil {
		s.cfg.Log.Error("simulator create", "err", err)
		openaiErr(w, http.StatusInternalServerError, "internal_error", "simulator storage failed")
		return
	}
	if isNew && strings.Contains(b.Prompt, Directive5xxOnce) {
		// Accepted, but the answer is lost: the client must retry with the same key and find this task.
		if err := s.markAnswered5xx(t); err == nil {
			openaiErr(w, http.StatusServiceUnavailable, "upstream_overloaded", "simulated 503 after accepting the task")
			return
		}
	}
	s.videogenTask(w, t)
}

func (s *Sim) videogenGet(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		openaiErr(w, http.StatusNotFound, "not_found", "no such task for this credential")
		return
	}
	s.videogenTask(w, t)
}

func (s *Sim) videogenTask(w http.ResponseWriter, t *Task) {
	status, progress := t.state(s.cfg.Now())
	out := map[string]any{
		"id": t.ID, "object": "video", "model": t.Model, "status": status, "progress": progress,
		"created_at": t.CreatedAt.Unix(), "seconds": strconv.Itoa(t.Seconds), "size": t.Size,
		"generate_audio": t.GenerateAudio,
	}
	if t.Seed != nil {
		out["seed"] = *t.Seed
	}
	if status == stFailed {
		if t.FailPolicy {
			out["error"] = map[string]string{"code": "moderation_blocked", "message": "Your request was blocked by our moderation system. ([sim:fail-policy])"}
		} else {
			out["error"] = map[string]string{"code": "generation_failed", "message": "the simulator failed this task as its prompt asked ([sim:fail])"}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) videogenContent(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		openaiErr(w, http.StatusNotFound, "not_found", "no such task for this credential")
		return
	}
	if st, _ := t.state(s.cfg.Now()); st != stCompleted {
		openaiErr(w, http.StatusConflict, "video_not_ready", "task is "+st)
		return
	}
	fail := func(status int, msg string) { openaiErr(w, status, "internal_error", msg) }
	switch v := r.URL.Query().Get("variant"); v {
	case "", "video":
		s.serveVideo(w, t, fail)
	case stills.Thumbnail, stills.Spritesheet:
		s.serveStill(w, t, v, fail)
	default:
		openaiErr(w, http.StatusBadRequest, "invalid_value", "variant must be video, thumbnail or spritesheet")
	}
}
