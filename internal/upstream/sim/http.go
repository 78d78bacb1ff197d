package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"videogen/internal/mp4synth"
	"videogen/models"
)

// ServeHTTP answers the upstream protocol: POST /v1/videos, GET /v1/videos/{id}, GET /v1/videos/{id}/content.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux().ServeHTTP(w, r)
}

func (s *Sim) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/videos", s.authed(s.handleCreate))
	m.HandleFunc("GET /v1/videos/{id}", s.authed(s.handleGet))
	m.HandleFunc("GET /v1/videos/{id}/content", s.authed(s.handleContent))
	return m
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (s *Sim) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		own := owner(secret)
		if !ok || !s.owners[own] {
			writeErr(w, http.StatusUnauthorized, "invalid_api_key", "unknown credential")
			return
		}
		h(w, r, own)
	}
}

// createBody is the platform's video request as the simulator reads it; seconds may come as a number or
// as a string of digits, as from OpenAI's SDKs.
type createBody struct {
	models.VideoRequest
	Seconds json.RawMessage `json:"seconds"`
}

// fetchInputs downloads every media URL of a submission, as a real provider does before it generates:
// a URL it cannot fetch (expired, unknown) makes it refuse the task. It returns the bytes read.
func fetchInputs(r *http.Request, b createBody) (int64, error) {
	var urls []string
	urls = append(urls, b.ImageURLs...)
	urls = append(urls, b.VideoURLs...)
	urls = append(urls, b.AudioURLs...)
	for _, u := range []string{b.StartImageURL, b.EndImageURL} {
		if u != "" {
			urls = append(urls, u)
		}
	}
	client := &http.Client{Timeout: 60 * time.Second}
	var total int64
	for _, u := range urls {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
		if err != nil {
			return total, fmt.Errorf("bad media URL %q: %w", u, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return total, fmt.Errorf("fetch media: %w", err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		total += n
		if resp.StatusCode != http.StatusOK {
			return total, fmt.Errorf("fetching a media URL answered HTTP %d", resp.StatusCode)
		}
		if err != nil {
			return total, fmt.Errorf("read media: %w", err)
		}
	}
	return total, nil
}

func (s *Sim) handleCreate(w http.ResponseWriter, r *http.Request, own string) {
	var b createBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_json", err.Error())
		return
	}
	secs, err := strconv.Atoi(strings.Trim(string(b.Seconds), `"`))
	if err != nil || secs < 1 || secs > 60 {
		writeErr(w, http.StatusBadRequest, "invalid_seconds", "seconds must be 1..60")
		return
	}
	if _, _, err := parseSize(b.Size); err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_size", err.Error())
		return
	}
	if strings.Contains(b.Prompt, DirectiveReject) {
		writeErr(w, http.StatusBadRequest, "content_policy_violation", "the simulator refuses prompts containing [sim:reject]")
		return
	}
	fetched, err := fetchInputs(r, b)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "invalid_media", "the simulator could not fetch an input: "+err.Error())
		return
	}
	d := s.cfg.Duration
	if strings.Contains(b.Prompt, DirectiveSlow) {
		d *= 10
	}
	t := &Task{
		IdemKey: r.Header.Get("Idempotency-Key"), Model: b.Model, Prompt: b.Prompt, Seconds: secs, Size: b.Size,
		AspectRatio: b.AspectRatio, GenerateAudio: b.GenerateAudio, Watermark: b.Watermark,
		Duration: d, Fail: strings.Contains(b.Prompt, DirectiveFail), InputBytes: fetched,
	}
	t, isNew, err := s.create(own, t)
	if errors.Is(err, errCapacity) {
		w.Header().Set("Retry-After", "1")
		writeErr(w, http.StatusTooManyRequests, "concurrency_limit", "this credential runs its maximum number of tasks")
		return
	}
	if err != nil {
		s.cfg.Log.Error("simulator create", "err", err)
		writeErr(w, http.StatusInternalServerError, "internal_error", "simulator storage failed")
		return
	}
	if isNew && strings.Contains(b.Prompt, Directive5xxOnce) {
		// Accepted, but the answer is lost: the client must retry with the same key and find this task.
		if err := s.markAnswered5xx(t); err == nil {
			writeErr(w, http.StatusServiceUnavailable, "upstream_overloaded", "simulated 503 after accepting the task")
			return
		}
	}
	s.writeTask(w, t)
}

func (s *Sim) handleGet(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		writeErr(w, http.StatusNotFound, "not_found", "no such task for this credential")
		return
	}
	s.writeTask(w, t)
}

func (s *Sim) writeTask(w http.ResponseWriter, t *Task) {
	status, progress := t.state(s.cfg.Now())
	out := map[string]any{
		"id": t.ID, "object": "video", "model": t.Model, "status": status, "progress": progress,
		"created_at": t.CreatedAt.Unix(), "seconds": strconv.Itoa(t.Seconds), "size": t.Size,
		"generate_audio": t.GenerateAudio,
	}
	if status == "failed" {
		out["error"] = map[string]string{"code": "generation_failed", "message": "the simulator failed this task as its prompt asked ([sim:fail])"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Sim) handleContent(w http.ResponseWriter, r *http.Request, own string) {
	t, ok := s.get(own, r.PathValue("id"))
	if !ok {
		writeErr(w, http.StatusNotFound, "not_found", "no such task for this credential")
		return
	}
	if st, _ := t.state(s.cfg.Now()); st != "completed" {
		writeErr(w, http.StatusConflict, "video_not_ready", "task is "+st)
		return
	}
	path, err := s.rendered(t)
	if err != nil {
		s.cfg.Log.Error("simulator render", "task", t.ID, "err", err)
		writeErr(w, http.StatusInternalServerError, "internal_error", "rendering failed")
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "internal_error", "output missing")
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "internal_error", "output unreadable")
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	_, _ = io.Copy(w, f)
}

// rendered returns the path of the task's MP4, rendering it once on first request.
func (s *Sim) rendered(t *Task) (string, error) {
	path := filepath.Join(s.outputDir(), t.ID+".mp4")
	lock, _ := s.render.LoadOrStore(t.ID, &sync.Mutex{})
	mu := lock.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	wd, ht, err := parseSize(t.Size)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(s.outputDir(), ".render-*")
	if err != nil {
		return "", fmt.Errorf("render %s: %w", t.ID, err)
	}
	_, err = mp4synth.Write(f, mp4synth.Params{Width: wd, Height: ht, Seconds: t.Seconds, FPS: 24, Seed: seed(t.ID)})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("render %s: %w", t.ID, err)
	}
	return path, nil
}

func seed(id string) int64 {
	var h int64
	for _, c := range id {
		h = h*31 + int64(c)
	}
	return h
}

func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w < 16 || h < 16 || w > 4096 || h > 4096 || w%2 != 0 || h%2 != 0 {
		return 0, 0, fmt.Errorf("size %q must be <even width>x<even height> within 16..4096", s)
	}
	return w, h, nil
}
