// Package sim is the built-in upstream simulator: it behaves like a real video provider — per-credential
// concurrency, progress over time, a real playable MP4 of the requested size — behind one of the
// wire protocols videogen speaks: the platform's own /v1/videos protocol (the default, for kind sim),
// OpenAI's Videos API exactly as its spec has it, BytePlus/Volcengine Ark's
// /api/v3/contents/generations/tasks, with the video on a presigned URL as Ark serves it, or the Gemini
// API's Veo operations (models/{model}:predictLongRunning), with the video a file of the API. Its tasks are
// kept on disk, so they outlive a restart of the platform and of the simulator as a real provider's
// would. Prompt directives trigger faults deterministically (docs/upstreams.md#simulator).
package sim

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"videogen/internal/infra/ids"
)

// Protocols the simulator speaks.
const (
	// ProtocolVideogen is the platform's own superset of OpenAI's /v1/videos, which kind sim speaks: the
	// whole video request, so the built-in simulator renders the whole catalog. The default.
	ProtocolVideogen = "videogen"
	// ProtocolOpenAI is OpenAI's Videos API as its spec has it, which kind openai speaks: it accepts only
	// what OpenAI accepts and answers as OpenAI answers.
	ProtocolOpenAI = "openai"
	ProtocolArk    = "ark"
	ProtocolGemini = "gemini" // the Gemini API's Veo operations (gemini.go)
)

// Prompt directives, understood in both protocols.
const (
	DirectiveFail       = "[sim:fail]"        // the task fails half-way (a generation failure)
	DirectiveFailPolicy = "[sim:fail-policy]" // the task fails half-way, its output refused by the content policy
	DirectiveReject     = "[sim:reject]"      // the submission is refused with 400 as bad parameters
	DirectivePolicy     = "[sim:policy]"      // the submission is refused with 400 as a content-policy violation
	Directive401        = "[sim:401]"         // the submission is answered 401 and its credential revoked (once per credential and prompt)
	Directive5xxOnce    = "[sim:5xx-once]"    // the first submission is accepted but answered with 503
	DirectiveSlow       = "[sim:slow]"        // the task takes ten times as long
	// Ark: the submission is refused 429 SetLimitExceeded (the account's limit for the model reached).
	DirectiveSetLimit = "[sim:set-limit]"
	// Gemini: the first operation of a credential and prompt ends filtered for its audio, as Veo's audio
	// filter does; the next one renders.
	DirectiveAudioFilterOnce = "[sim:audio-filter-once]"
)

// Config sets up a simulator.
type Config struct {
	Dir         string        // where tasks, outputs and the URL-signing key are kept
	Duration    time.Duration // queued → completed
	Concurrency int           // unfinished tasks per credential
	Secrets     []string      // accepted Bearer credentials
	// Protocol is the wire protocol: ProtocolVideogen (default), ProtocolOpenAI or ProtocolArk.
	Protocol string
	// Output is what a finished task serves: OutputRealistic (default), a video of the size and length
	// asked, or OutputTiny, the same few-KB video for every task (docs/upstreams.md#simulator).
	Output string
	// Keep is how long a finished task and its video stay available, like a provider's retention
	// (default 24 h, as Ark's video URLs); older ones are deleted, so a long-running simulator does not
	// grow without bound.
	Keep time.Duration
	Now  func() time.Time
	Log  *slog.Logger
}

// What the simulator's finished tasks serve (Config.Output).
const (
	// OutputRealistic renders each task's video at the size and length asked, and its stills from it.
	OutputRealistic = "realistic"
	// OutputTiny serves one tiny valid MP4 (64×36, one frame, about 5 KB) and its stills for every task,
	// rendered once and held in memory, so that serving an output costs almost nothing: make bench
	// measures the worker's lifecycle apart from the bytes it copies (docs/performance.md).
	OutputTiny = "tiny"
)

// Media is one input of a task, named with Ark's roles in both protocols.
type Media struct {
	Role string `json:"role"` // first_frame, last_frame, reference_image, reference_video or reference_audio
	URL  string `json:"url"`
}

// Task is one simulated generation, as stored on disk.
type Task struct {
	ID            string        `json:"id"`
	Owner         string        `json:"owner"` // digest of the credential that created it
	IdemKey       string        `json:"idempotency_key"`
	Model         string        `json:"model"`
	Prompt        string        `json:"prompt"`
	Seconds       int           `json:"seconds"`
	Size          string        `json:"size"`
	Resolution    string        `json:"resolution,omitempty"` // as asked (Ark); "" for OpenAI-style, which asks a size
	AspectRatio   string        `json:"aspect_ratio"`
	GenerateAudio bool          `json:"generate_audio"`
	Watermark     bool          `json:"watermark"`
	Seed          *int64        `json:"seed,omitempty"` // as asked; nil when not
	Media         []Media       `json:"media,omitempty"`
	CreatedAt     time.Time     `json:"created_at"`
	Duration      time.Duration `json:"duration"`
	Fail          bool          `json:"fail"`
	FailPolicy    bool          `json:"fail_policy,omitempty"`
	AudioFiltered bool          `json:"audio_filtered,omitempty"` // Gemini: ends filtered for its audio
	InputBytes    int64         `json:"input_bytes"`              // media fetched from the task's input URLs
	// Submissions counts POSTs that carried this task's idempotency key (1 unless the client retried).
	Submissions int  `json:"submissions"`
	Answered5xx bool `json:"answered_5xx"`
	// RequestDigest identifies the body of an Ark submission, which carries no idempotency key: a
	// [sim:5xx-once] body is answered 503 once, and its retry creates a second task.
	RequestDigest string `json:"request_digest,omitempty"`
	// Ark only: whether return_last_frame was asked; execution_expires_after (a task unfinished then
	// ends expired); when a DELETE cancelled the task while it was queued.
	LastFrame    bool          `json:"last_frame,omitempty"`
	ExpiresAfter time.Duration `json:"expires_after,omitempty"`
	CancelledAt  *time.Time    `json:"cancelled_at,omitempty"`
	// InputReference is the first frame uploaded as a file part of OpenAI's create form (ProtocolOpenAI).
	InputReference *Upload `json:"input_reference,omitempty"`

	fps int // frames a second of its files when not the simulator's 24 (tinyTask)
}

// Upload is a file a submission carried in its body rather than by URL.
type Upload struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	// The image's pixel size, as probing read it (zero: not read).
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// Sim is the simulator. It is an http.Handler.
type Sim struct {
	cfg     Config
	owners  map[string]bool
	urlKey  []byte // signs Ark video URLs; kept in Dir so URLs stay valid across restarts
	handler http.Handler

	mu      sync.Mutex
	refused int // submissions answered 429 because the credential was full
	pruned  time.Time
	tasks   map[string]*Task
	byKey   map[string]string // owner + key → task id
	revoked map[string]bool   // owners refused by [sim:401] until Reinstate or a restart
	tripped map[string]bool   // owner + prompt of each [sim:401] that revoked its credential
	// open lists, per owner, the tasks not yet seen finished: a task's state only moves forward with the
	// clock, so a create counts the running ones among these and forgets the finished — not all tasks.
	open   map[string]map[string]bool
	render sync.Map // task id → *sync.Mutex, so one output is rendered once
	tiny   sync.Map // file suffix → *tinyFile, with OutputTiny
}

// New opens (or creates) a simulator whose state lives in cfg.Dir.
func New(cfg Config) (*Sim, error) {

	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24 * time.Hour
	}
	switch cfg.Protocol {
	case "":
		cfg.Protocol = ProtocolVideogen
	case ProtocolVideogen, ProtocolOpenAI, ProtocolArk, ProtocolGemini:
	default:
		return nil, fmt.Errorf("simulator protocol %q: want %s, %s, %s or %s", cfg.Protocol, ProtocolVideogen, ProtocolOpenAI, ProtocolArk, ProtocolGemini)
	}
	switch cfg.Output {
	case "":
		cfg.Output = OutputRealistic
	case OutputRealistic, OutputTiny:
	default:
		return nil, fmt.Errorf("simulator output %q: want %s or %s", cfg.Output, OutputRealistic, OutputTiny)
	}
	s := &Sim{cfg: cfg, owners: map[string]bool{}, tasks: map[string]*Task{}, byKey: map[string]string{}, revoked: map[string]bool{}, tripped: map[string]bool{}, open: map[string]map[string]bool{}}
	for _, sec := range cfg.Secrets {
		s.owners[owner(sec)] = true
	}
	for _, d := range []string{s.taskDir(), s.outputDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("simulator folder: %w", err)
		}
	}
	key, err := loadKey(filepath.Join(cfg.Dir, "url-signing.key"))
	if err != nil {
		return nil, err
	}
	s.urlKey = key
	if err := s.load(); err != nil {
		return nil, err
	}
	switch cfg.Protocol {
	case ProtocolArk:
		s.handler = s.arkMux()
	case ProtocolGemini:
		s.handler = s.geminiMux()
	case ProtocolOpenAI:
		s.handler = s.openaiMux()
	default:
		s.handler = s.videogenMux()
	}
	return s, nil
}

// loadKey reads the simulator's URL-signing key, creating it on first start.
func loadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read simulator key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("simulator key: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return nil, fmt.Errorf("write simulator key: %w", err)
	}
	_, err = f.Write(key)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("write simulator key: %w", err)
	}
	return key, nil
}

func owner(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:8])
}

func (s *Sim) taskDir() string   { return filepath.Join(s.cfg.Dir, "tasks") }
func (s *Sim) outputDir() string { return filepath.Join(s.cfg.Dir, "outputs") }

func (s *Sim) load() error {
	entries, err := os.ReadDir(s.taskDir())
	if err != nil {
		return fmt.Errorf("read simulator tasks: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.taskDir(), e.Name()))
		if err != nil {
			return fmt.Errorf("read simulator task %s: %w", e.Name(), err)
		}
		var t Task
		if err := json.Unmarshal(b, &t); err != nil {
			return fmt.Errorf("decode simulator task %s: %w", e.Name(), err)
		}
		s.tasks[t.ID] = &t
		s.opened(&t)
		if t.IdemKey != "" {
			s.byKey[t.Owner+"\x00"+t.IdemKey] = t.ID
		}
	}
	return nil
}

// save writes a task atomically (temp file, rename): a crash of the simulator never leaves half a task.
// It is not synced to disk: the simulator's tasks outlive a restart of its process, as the tests and
// make run need, and a simulator need not survive a power cut — while an fsync per submission, under the
// simulator's lock, would make it the slowest part of a load test (docs/performance.md).
func (s *Sim) save(t *Task) error {
	b, _ := json.Marshal(t)
	f, err := os.CreateTemp(s.taskDir(), ".task-*")
	if err != nil {
		return fmt.Errorf("save simulator task: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(s.taskDir(), t.ID+".json"))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("save simulator task %s: %w", t.ID, err)
	}
	return nil
}

// Simulated states, named as OpenAI's protocol names them (the Ark handlers translate).
const (
	stQueued     = "queued"
	stInProgress = "in_progress"
	stCompleted  = "completed"
	stFailed     = "failed"
	stCancelled  = "cancelled" // Ark only
	stExpired    = "expired"   // Ark only
)

// state is a task's status and progress at now: the simulator derives it from the clock, so it needs no
// background goroutine and survives restarts unchanged.
func (t *Task) state(now time.Time) (status string, progress int) {
	elapsed := now.Sub(t.CreatedAt)
	d := t.Duration
	switch {
	case t.CancelledAt != nil:
		return stCancelled, 0
	case t.expires() && elapsed >= t.ExpiresAfter:
		return stExpired, 0
	case (t.Fail || t.FailPolicy) && elapsed >= d/2:
		return stFailed, 50
	case elapsed >= d:
		return stCompleted, 100
	case elapsed < d/10:
		return stQueued, 0
	default:
		return stInProgress, min(int(elapsed*100/d), 99)
	}
}

// changedAt is when the task entered its state at now.
func (t *Task) changedAt(now time.Time) time.Time {
	switch st, _ := t.state(now); st {
	case stCancelled, stExpired:
		return t.endsAt()
	case stFailed:
		return t.CreatedAt.Add(t.Duration / 2)
	case stCompleted:
		return t.CreatedAt.Add(t.Duration)
	case stInProgress:
		return t.CreatedAt.Add(t.Duration / 10)
	default:
		return t.CreatedAt
	}
}

// endsAt is when the task finishes, one way or the other; its video and URLs last Keep from then.
func (t *Task) endsAt() time.Time {
	switch {
	case t.CancelledAt != nil:
		return *t.CancelledAt
	case t.expires():
		return t.CreatedAt.Add(t.ExpiresAfter)
	}
	if t.Fail || t.FailPolicy {
		return t.CreatedAt.Add(t.Duration / 2)
	}
	return t.CreatedAt.Add(t.Duration)
}

// expires reports whether the task outlives its execution_expires_after, ending expired at it.
func (t *Task) expires() bool {
	end := t.Duration
	if t.Fail || t.FailPolicy {
		end = t.Duration / 2
	}
	return t.ExpiresAfter > 0 && t.ExpiresAfter < end
}

// renderSeed is the seed the task's video is drawn with: the one asked for, so a repeated request
// with the same seed gets the same video, else one derived from the task id.
func (t *Task) renderSeed() int64 {
	if t.Seed != nil && *t.Seed >= 0 {
		return *t.Seed
	}
	// A seed of the task's own, in the range providers take (0 to 2³²−1, as Ark's seed).
	var h uint32
	for _, c := range t.ID {
		h = h*31 + uint32(c)
	}
	return int64(h)
}

// errCapacity is returned by create when the credential runs Concurrency tasks already.
var errCapacity = errors.New("credential at capacity")

// create registers a submission; it returns the task (existing for a repeated key) and whether it is new.
func (s *Sim) create(own string, t *Task) (*Task, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.IdemKey != "" {
		if id, ok := s.byKey[own+"\x00"+t.IdemKey]; ok {
			prior := s.tasks[id]
			prior.Submissions++
			if err := s.save(prior); err != nil {
				return nil, false, err
			}
			return prior, false, nil
		}
	}
	now := s.cfg.Now()
	s.pruneLocked(now)
	running := 0
	for id := range s.open[own] {
		x, ok := s.tasks[id]
		if st, _ := x.stateIf(ok, now); st == stQueued || st == stInProgress {
			running++
		} else {
			delete(s.open[own], id) // finished (or gone): it never runs again
		}
	}
	if running >= s.cfg.Concurrency {
		s.refused++
		return nil, false, errCapacity
	}
	t.ID = s.newID(now)
	t.Owner = own
	t.CreatedAt = now
	t.Submissions = 1
	if err := s.save(t); err != nil {
		return nil, false, err
	}
	s.tasks[t.ID] = t
	s.opened(t)
	if t.IdemKey != "" {
		s.byKey[own+"\x00"+t.IdemKey] = t.ID
	}
	return t, true, nil
}

// opened counts t among its owner's tasks that may still be running.
func (s *Sim) opened(t *Task) {
	if s.open[t.Owner] == nil {
		s.open[t.Owner] = map[string]bool{}
	}
	s.open[t.Owner][t.ID] = true
}

// stateIf is t.state(now) for a task that exists (ok), else a finished state.
func (t *Task) stateIf(ok bool, now time.Time) (string, int) {
	if !ok {
		return stCompleted, 100
	}
	return t.state(now)
}

// newID names a task as the protocol's provider would: OpenAI's ids read video_<hex> (VideoResource's
// example, video_123), Ark's cgt-<time>-<5 characters>.
func (s *Sim) newID(now time.Time) string {
	switch s.cfg.Protocol {
	case ProtocolGemini:
		// Lowercase letters and digits: the id is also the video's file id, which the genai SDK reads
		// as [a-z0-9]+.
		return strings.ToLower(ids.NewSimTaskID()[len("simtask_"):])
	case ProtocolOpenAI:
		return "video_" + strings.TrimPrefix(ids.NewSimTaskID(), "simtask_")
	case ProtocolVideogen:
		return ids.NewSimTaskID()
	}
	return "cgt-" + now.UTC().Format("20060102150405") + "-" + strings.ToLower(ids.NewSimTaskID()[len("simtask_"):][:5])
}

func (s *Sim) get(own, id string) (*Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.Owner != own {
		return nil, false
	}
	return t, true
}

// byID returns a task whoever owns it, for the unauthenticated video URLs (their signature is the proof).
func (s *Sim) byID(id string) (*Task, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	return t, ok
}

// pruneLocked deletes tasks that ended more than Keep ago, with their videos, at most once a minute.
func (s *Sim) pruneLocked(now time.Time) {
	if now.Sub(s.pruned) < time.Minute {
		return
	}
	s.pruned = now
	for id, t := range s.tasks {
		if now.Sub(t.endsAt()) < s.cfg.Keep {
			continue
		}
		_ = os.Remove(filepath.Join(s.taskDir(), id+".json"))
		s.removeOutputs(id)
		delete(s.tasks, id)
		if t.IdemKey != "" {
			delete(s.byKey, t.Owner+"\x00"+t.IdemKey)
		}
	}
}

// removeOutputs deletes every file rendered for task id: its video and its stills.
func (s *Sim) removeOutputs(id string) {
	files, _ := filepath.Glob(filepath.Join(s.outputDir(), id+".*"))
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// markAnswered5xx records that the first submission of t was answered with 503.
func (s *Sim) markAnswered5xx(t *Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Answered5xx = true
	return s.save(t)
}

// answered5xx reports whether a submission of this body by this credential was answered 503 already.
func (s *Sim) answered5xx(own, digest string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		if t.Owner == own && t.RequestDigest == digest && t.Answered5xx {
			return true
		}
	}
	return false
}

// revokeOnce handles a [sim:401] prompt: the first time a credential sends it, the credential is revoked
// — every later call with it answers 401, as a provider does with a revoked key — and the submission is
// refused. Once Reinstate (or a restart) has put the credential back, the same prompt on it is served
// like any other, so the task that tripped it can complete after an operator's fix. It reports whether
// this submission is refused.
func (s *Sim) revokeOnce(own, prompt string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := own + "\x00" + prompt
	if s.tripped[key] {
		return false
	}
	s.tripped[key] = true
	s.revoked[own] = true
	return true
}

// firstTime reports whether this is the first time a credential sends a prompt with directive.
func (s *Sim) firstTime(own, directive, prompt string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := own + "\x00" + directive + "\x00" + prompt
	if s.tripped[key] {
		return false
	}
	s.tripped[key] = true
	return true
}

func (s *Sim) isRevoked(own string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revoked[own]
}

// Reinstate accepts again every credential a [sim:401] revoked, as a restart of the simulator does.
func (s *Sim) Reinstate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.revoked)
}

// Refused returns how many submissions were refused because their credential was at capacity: a
// platform that counts its slots right never causes one.
func (s *Sim) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Tasks returns a copy of every task the simulator knows, for tests and the operator.
func (s *Sim) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, *t)
	}
	return out
}
