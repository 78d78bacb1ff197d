package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"videogen/internal/domain/stills"
	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/internal/infra/mediaprobe"
	"videogen/models"
)

// ServeHTTP answers the simulator's protocol: for OpenAI-style, POST /v1/videos, GET /v1/videos/{id},
// GET /v1/videos/{id}/content; for Ark, POST /api/v3/contents/generations/tasks,
// GET /api/v3/contents/generations/tasks/{id} and the presigned video URLs under /files/.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// authed checks the Bearer credential: unknown, or revoked by [sim:401], answers 401.
func (s *Sim) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		own := owner(secret)
		if !ok || !s.owners[own] || s.isRevoked(own) {
			s.unauthorized(w)
			return
		}
		h(w, r, own)
	}
}

func (s *Sim) unauthorized(w http.ResponseWriter) {
	if s.cfg.Protocol == ProtocolArk {
		arkErr(w, http.StatusUnauthorized, "AuthenticationError", "The API key or AK/SK in the request is missing or invalid.")
		return
	}
	openaiErr(w, http.StatusUnauthorized, "invalid_api_key", "unknown or revoked credential")
}

// fetchInputs downloads every media URL of a submission, as a real provider does before it generates:
// a URL it cannot fetch (expired, unknown) makes it refuse the task. It returns the bytes read.
func fetchInputs(ctx context.Context, media []Media) (int64, error) {
	n, _, err := probeInputs(ctx, media)
	return n, err
}

// roleField is the request field of our API each media role stands for, so that a fetched input is
// checked against a capability table as a create's is.
var roleField = map[string]string{"first_frame": "start_image_url", "last_frame": "end_image_url",
	"reference_image": "image_urls", "reference_video": "video_urls", "reference_audio": "audio_urls"}

// probeInputs fetches every input as fetchInputs does, and reads of each what the provider would: its
// type, its size in bytes and, for images and videos, its pixel size and duration (mediaprobe).
func probeInputs(ctx context.Context, media []Media) (int64, []models.MediaProbe, error) {
	client := &http.Client{Timeout: 60 * time.Second}
	var total int64
	var probes []models.MediaProbe
	positions := map[string]int{}
	for _, m := range media {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
		if err != nil {
			return total, nil, fmt.Errorf("bad media URL %q: %w", m.URL, err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return total, nil, fmt.Errorf("fetch media: %w", err)
		}
		ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		probe := mediaprobe.Start(ctype)
		var sink io.Writer = io.Discard
		if probe != nil {
			sink = probe
		}
		n, err := io.Copy(sink, resp.Body)
		_ = resp.Body.Close()
		seen := probe.Finish()
		total += n
		if resp.StatusCode != http.StatusOK {
			return total, nil, fmt.Errorf("fetching a media URL answered HTTP %d", resp.StatusCode)
		}
		if err != nil {
			return total, nil, fmt.Errorf("read media: %w", err)
		}
		field := roleField[m.Role]
		probes = append(probes, models.MediaProbe{Field: field, Position: positions[field], ContentType: ctype, Bytes: n,
			Width: seen.Width, Height: seen.Height, DurationMs: seen.DurationMs})
		positions[field]++
	}
	return total, probes, nil
}

// serveVideo streams the task's rendered MP4.
func (s *Sim) serveVideo(w http.ResponseWriter, t *Task, fail func(status int, msg string)) {
	s.serveFile(w, t, "video/mp4", ".mp4", s.renderVideo, fail)
}

// serveStill serves the task's thumbnail or spritesheet, as OpenAI's content endpoint does for its
// variants: a JPEG drawn in pure Go from the same frames the video shows (mp4synth.Frame).
func (s *Sim) serveStill(w http.ResponseWriter, t *Task, variant string, fail func(status int, msg string)) {
	render := func(t *Task, w io.Writer) error { return renderStill(t, variant, w) }
	s.serveFile(w, t, "image/jpeg", "."+variant+".jpg", render, fail)
}

// serveFile streams one of the task's rendered files (suffix names which), rendering it on first request.
// With OutputTiny it serves the tiny file of that suffix from memory instead.
func (s *Sim) serveFile(w http.ResponseWriter, t *Task, contentType, suffix string, render func(*Task, io.Writer) error,
	fail func(status int, msg string)) {
	if s.cfg.Output == OutputTiny {
		b, err := s.tinyBytes(suffix, render)
		if err != nil {
			s.cfg.Log.Error("simulator render", "file", "tiny"+suffix, "err", err)
			fail(http.StatusInternalServerError, "rendering failed")
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
		return
	}
	path, err := s.rendered(t, suffix, render)
	if err != nil {
		s.cfg.Log.Error("simulator render", "task", t.ID, "err", err)
		fail(http.StatusInternalServerError, "rendering failed")
		return
	}
	f, err := os.Open(path)
	if err != nil {
		fail(http.StatusInternalServerError, "output missing")
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		fail(http.StatusInternalServerError, "output unreadable")
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	_, _ = io.Copy(w, f)
}

// rendered returns the path of the task's file with the given suffix, rendering it once on first request.
func (s *Sim) rendered(t *Task, suffix string, render func(*Task, io.Writer) error) (string, error) {
	path := filepath.Join(s.outputDir(), t.ID+suffix)
	lock, _ := s.render.LoadOrStore(t.ID+suffix, &sync.Mutex{})
	mu := lock.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	f, err := os.CreateTemp(s.outputDir(), ".render-*")
	if err != nil {
		return "", fmt.Errorf("render %s: %w", t.ID, err)
	}
	err = render(t, f)
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

// tinyTask is what every file of OutputTiny is drawn from: 64×36, one second at one frame a second — a
// valid MP4 of about 5 KB, and stills of that frame.
var tinyTask = Task{ID: "tiny", Size: "64x36", Seconds: 1, fps: 1}

// tinyFile is one file of OutputTiny, rendered once.
type tinyFile struct {
	once sync.Once
	b    []byte
	err  error
}

// tinyBytes is the file of the given suffix drawn from tinyTask, rendered on first request and then
// served from memory: every task serves the same bytes.
func (s *Sim) tinyBytes(suffix string, render func(*Task, io.Writer) error) ([]byte, error) {
	v, _ := s.tiny.LoadOrStore(suffix, &tinyFile{})
	f := v.(*tinyFile)
	f.once.Do(func() {
		var buf bytes.Buffer
		f.err = render(&tinyTask, &buf)
		f.b = buf.Bytes()
	})
	return f.b, f.err
}

// params is what the task's video is drawn from.
func (t *Task) params() (mp4synth.Params, error) {
	wd, ht, err := parseSize(t.Size)
	if err != nil {
		return mp4synth.Params{}, err
	}
	rate := fps
	if t.fps != 0 {
		rate = t.fps
	}
	return mp4synth.Params{Width: wd, Height: ht, Seconds: t.Seconds, FPS: rate, Seed: t.renderSeed()}, nil
}

func (s *Sim) renderVideo(t *Task, f io.Writer) error {
	p, err := t.params()
	if err != nil {
		return err
	}
	_, err = mp4synth.Write(f, p)
	return err
}

// renderStill draws the task's thumbnail (its first frame, at its size) or spritesheet (its frames at
// tile size) from the frames of its video.
func renderStill(t *Task, variant string, f io.Writer) error {
	p, err := t.params()
	if err != nil {
		return err
	}
	if variant == stills.Thumbnail {
		img, err := mp4synth.Frame(p, 0, p.Width, p.Height)
		if err != nil {
			return err
		}
		return stills.EncodeThumbnail(f, img)
	}
	frame := func(n, w, h int) (image.Image, error) { return mp4synth.Frame(p, n, w, h) }
	return stills.EncodeSpritesheet(f, p.Width, p.Height, p.Seconds*p.FPS, frame)
}

// fps is the frame rate of every simulated video, as Seedance renders.
const fps = 24

func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil || w < 16 || h < 16 || w > 4096 || h > 4096 || w%2 != 0 || h%2 != 0 {
		return 0, 0, fmt.Errorf("size %q must be <even width>x<even height> within 16..4096", s)
	}
	return w, h, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
