// Package webhooks tells customers' endpoints when a video is done (docs/webhooks.md). It keeps the
// endpoints and their signing secrets, writes an event in the transaction of the task's terminal
// transition (TasksEnded) with the job that delivers it (River, internal/infra/queue), and delivers it,
// signed the Standard Webhooks way as OpenAI signs its own, from any instance, with retries over about
// three days, fairly to every account.
package webhooks

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/queue"
	"videogen/internal/infra/seal"
)

// The event types an endpoint may receive: OpenAI's two video events (openai-go webhooks.go lists them).
const (
	VideoCompleted = "video.completed"
	VideoFailed    = "video.failed"
)

// EventTypes lists every event type, in the order the console offers them.
var EventTypes = []string{VideoCompleted, VideoFailed}

// MaxEndpoints is how many endpoints one account may have: enough for production, staging and a
// colleague's test receiver, few enough that one event cannot fan out into a flood.
const MaxEndpoints = 10

// Config tunes the service; zero fields take the defaults named beside them.
type Config struct {
	Secrets []string // APP_SECRET values: the first seals endpoint secrets, all open them
	// Now is the clock (tests move it); required.
	Now func() time.Time
	// ConsoleURL is the console's address, for the e-mail that says an endpoint was disabled.
	ConsoleURL string

	Timeout     time.Duration // one attempt, connect to last byte (10 s)
	Lease       time.Duration // a job's bound (LEASE_DURATION, 1 min): an attempt takes half of it at most
	PerAccount  int           // attempts in flight for one account on this instance (4 of the queue's 16)
	PerEndpoint int           // attempts in flight to one endpoint from this instance (2)
	// Backlog is how many waiting deliveries an account may have before its next ones queue behind
	// every other account's (8).
	Backlog int
	// Schedule is the wait after each failed attempt; after the last, the delivery is given up
	// (docs/webhooks.md#retries).
	Schedule []time.Duration
	// DisableAfter is how long an endpoint may fail without a success before it is disabled (72 h).
	DisableAfter time.Duration
}

// DefaultSchedule is the wait after the 1st, 2nd, … failed attempt: ten attempts over 72 h 6 min, about
// three days as Stripe retries, the last just past DisableAfter, so an endpoint that failed them all is
// disabled by its last.
var DefaultSchedule = []time.Duration{
	time.Minute, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 20*time.Hour + 30*time.Minute,
}

// Mailer queues the e-mail that tells an account's owner that an endpoint was disabled, in the
// transaction that disables it (notify.Notifier).
type Mailer interface {
	WebhookDisabled(tx *gorm.DB, to, url, why, link string) error
}

// Service is the endpoints, their events and the deliveries' jobs.
type Service struct {
	cfg    Config
	db     *db.DB
	queue  *queue.Queue
	seal   *seal.Sealer
	fetch  *mediafetch.Fetcher
	mail   Mailer
	log    *slog.Logger
	flight inFlight

	testsMu sync.Mutex
	tests   map[int64]int // synchronous API tests under way per account (TestNow)
}

// New returns the service, its workers added to q. fetch is the guard every URL passes, at save time and
// on every delivery.
func New(d *db.DB, q *queue.Queue, fetch *mediafetch.Fetcher, mail Mailer, log *slog.Logger, cfg Config) (*Service, error) {
	s, err := seal.New(cfg.Secrets, seal.WebhookSecret)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if cfg.Now == nil {
		// The clock is given, never assumed: a test that moves time must move every part's (docs/architecture.md).
		return nil, errors.New("webhooks: no clock (Config.Now)")
	}
	cfg.Timeout = orDefault(cfg.Timeout, 10*time.Second)
	cfg.Lease = orDefault(cfg.Lease, time.Minute)
	// An attempt and its record end well inside the job's bound, so no other instance takes a delivery
	// still being attempted.
	cfg.Timeout = min(cfg.Timeout, cfg.Lease/2)
	cfg.DisableAfter = orDefault(cfg.DisableAfter, 72*time.Hour)
	if cfg.PerAccount <= 0 {
		cfg.PerAccount = 4
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 2
	}
	if cfg.Backlog <= 0 {
		cfg.Backlog = 8
	}
	if len(cfg.Schedule) == 0 {
		cfg.Schedule = DefaultSchedule
	}
	svc := &Service{cfg: cfg, db: d, queue: q, seal: s, fetch: fetch, mail: mail, log: log,
		flight: inFlight{byAccount: map[int64][]time.Time{}, byEndpoint: map[string][]time.Time{}}}
	queue.Add(q, &deliveryWorker{s: svc})
	queue.Add(q, &pruneWorker{s: svc})
	q.Every(time.Hour, func() river.JobArgs { return pruneArgs{} })
	return svc, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC().Truncate(time.Microsecond) }

// Invalid is a refusal of what a customer asked of an endpoint, in words for the console.
type Invalid struct {
	Field   string // "url", "events" or "" (the request as a whole)
	Message string
}

func (e *Invalid) Error() string { return e.Message }

// ErrNoEndpoint: the account has no such endpoint (or no such delivery of it).
var ErrNoEndpoint = errors.New("no such webhook endpoint")
