// Package sim is the built-in upstream simulator: it behaves like a real video provider behind an
// OpenAI-style /v1/videos HTTP protocol — per-credential concurrency, progress over time, a real
// playable MP4 of the requested size — and keeps its tasks on disk, so they outlive a restart of the
// platform as a real provider's would. Prompt directives trigger faults deterministically (docs/design.md §8).
package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"videogen/internal/ids"
)

// Prompt directives.
const (
	DirectiveFail    = "[sim:fail]"     // the task fails half-way
	DirectiveReject  = "[sim:reject]"   // the submission is refused with 400
	Directive5xxOnce = "[sim:5xx-once]" // the first submission is accepted but answered with 503
	DirectiveSlow    = "[sim:slow]"     // the task takes ten times as long
)

// Config sets up a simulator.
type Config struct {
	Dir         string        // where tasks and outputs are kept
	Duration    time.Duration // queued → completed
	Concurrency int           // unfinished tasks per credential
	Secrets     []string      // accepted Bearer credentials
	// Keep is how long a finished task and its video stay available, like a provider's retention
	// (default 24 h); older ones are deleted, so a long-running simulator does not grow without bound.
	Keep time.Duration
	Now  func() time.Time
	Log  *slog.Logger
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
	AspectRatio   string        `json:"aspect_ratio"`
	GenerateAudio bool          `json:"generate_audio"`
	Watermark     bool          `json:"watermark"`
	CreatedAt     time.Time     `json:"created_at"`
	Duration      time.Duration `json:"duration"`
	Fail          bool          `json:"fail"`
	InputBytes    int64         `json:"input_bytes"` // media fetched from the task's input URLs
	// Submissions counts POSTs that carried this task's idempotency key (1 unless the client retried).
	Submissions int  `json:"submissions"`
	Answered5xx bool `json:"answered_5xx"`
}

// Sim is the simulator. It is an http.Handler.
type Sim struct {
	cfg    Config
	owners map[string]bool

	mu      sync.Mutex
	refused int // submissions answered 429 because the credential was full
	pruned  time.Time
	tasks   map[string]*Task
	byKey   map[string]string // owner + key → task id
	render  sync.Map          // task id → *sync.Mutex, so one output is rendered once
}

// New opens (or creates) a simulator whose state lives in cfg.Dir.
func New(cfg Config) (*Sim, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 24 * time.Hour
	}
	s := &Sim{cfg: cfg, owners: map[string]bool{}, tasks: map[string]*Task{}, byKey: map[string]string{}}
	for _, sec := range cfg.Secrets {
		s.owners[owner(sec)] = true
	}
	for _, d := range []string{s.taskDir(), s.outputDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("simulator folder: %w", err)
		}
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
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
		if t.IdemKey != "" {
			s.byKey[t.Owner+"\x00"+t.IdemKey] = t.ID
		}
	}
	return nil
}

// save writes a task atomically (temp file, fsync, rename): a crash never leaves half a task.
func (s *Sim) save(t *Task) error {
	b, _ := json.Marshal(t)
	f, err := os.CreateTemp(s.taskDir(), ".task-*")
	if err != nil {
		return fmt.Errorf("save simulator task: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
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

// state is a task's status and progress at now: the simulator derives it from the clock, so it needs no
// background goroutine and survives restarts unchanged.
func (t *Task) state(now time.Time) (status string, progress int) {
	elapsed := now.Sub(t.CreatedAt)
	d := t.Duration
	switch {
	case t.Fail && elapsed >= d/2:
		return "failed", 50
	case elapsed >= d:
		return "completed", 100
	case elapsed < d/10:
		return "queued", 0
	default:
		return "in_progress", min(int(elapsed*100/d), 99)
	}
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
	for _, x := range s.tasks {
		if x.Owner == own {
			if st, _ := x.state(now); st == "queued" || st == "in_progress" {
				running++
			}
		}
	}
	if running >= s.cfg.Concurrency {
		s.refused++
		return nil, false, errCapacity
	}
	t.ID = ids.NewSimTaskID()
	t.Owner = own
	t.CreatedAt = now
	t.Submissions = 1
	if err := s.save(t); err != nil {
		return nil, false, err
	}
	s.tasks[t.ID] = t
	if t.IdemKey != "" {
		s.byKey[own+"\x00"+t.IdemKey] = t.ID
	}
	return t, true, nil
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

// pruneLocked deletes tasks that ended more than Keep ago, with their videos, at most once a minute.
func (s *Sim) pruneLocked(now time.Time) {
	if now.Sub(s.pruned) < time.Minute {
		return
	}
	s.pruned = now
	for id, t := range s.tasks {
		if now.Sub(t.CreatedAt.Add(t.Duration)) < s.cfg.Keep {
			continue
		}
		_ = os.Remove(filepath.Join(s.taskDir(), id+".json"))
		_ = os.Remove(filepath.Join(s.outputDir(), id+".mp4"))
		delete(s.tasks, id)
		if t.IdemKey != "" {
			delete(s.byKey, t.Owner+"\x00"+t.IdemKey)
		}
	}
}

// markAnswered5xx records that the first submission of t was answered with 503.
func (s *Sim) markAnswered5xx(t *Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.Answered5xx = true
	return s.save(t)
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
