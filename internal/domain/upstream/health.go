package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"gorm.io/gorm/clause"

	"videogen/internal/infra/db"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// HealthConfig tunes the circuit breakers (docs/upstreams.md#health).
type HealthConfig struct {
	// Failures in a row that open a credential's breaker: it then takes no new task for Cooldown, after
	// which one submission is let through to probe it.
	Failures int
	Cooldown time.Duration
	Window   int          // latest calls kept per credential for the error rate and latency percentiles
	Instance string       // this instance's name in upstream_health
	Log      *slog.Logger // where breaker changes are told
	Now      func() time.Time
}

// Health is this instance's view of each credential: a circuit breaker over submissions (gobreaker),
// the error rate and latencies of its latest calls, its last error, and whether the provider refused its
// key (which every instance learns through the database).
type Health struct {
	cfg HealthConfig

	mu    sync.Mutex
	creds map[string]*credHealth
}

type credHealth struct {
	breaker  *gobreaker.CircuitBreaker[Status]
	openedAt time.Time
	calls    []call // ring of the latest calls
	next     int
	lastErr  string
	lastAt   time.Time
	authErr  string    // the provider refused the key or the account is out of credit (here or, through the database, on another instance)
	authKind string    // MarkKey or MarkCredit
	authAt   time.Time // when authErr was set here
	// closed: aliases whose route the provider refused for this key (ErrRoute: the model is not served
	// or not activated), with the reason; only that route takes no new task, until a reload.
	closed map[string]string
	// remoteOpen: another instance published this credential's breaker as open, recently.
	remoteOpen bool
}

type call struct {
	took   time.Duration
	failed bool
}

// NewHealth returns an empty health register.
func NewHealth(cfg HealthConfig) *Health {
	if cfg.Failures < 1 {
		cfg.Failures = 5
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 30 * time.Second
	}
	if cfg.Window < 1 {
		cfg.Window = 200
	}
	return &Health{cfg: cfg, creds: map[string]*credHealth{}}
}

// failure is what counts against a credential: no answer, a 5xx, a refused key, an account out of
// credit, a model the provider does not serve for it, or a rate limit (a 429 not about credit, which
// keeps coming while the provider is overloaded). A refusal of the request itself or an unknown task say
// the credential works.
func failure(err error) bool {
	return errors.Is(err, ErrTransient) || errors.Is(err, ErrAuth) || errors.Is(err, ErrOutOfCredit) ||
		errors.Is(err, ErrRoute) || errors.Is(err, ErrBusy)
}

// The kinds of lasting mark that keep a credential from new tasks until an operator reloads it.
const (
	MarkKey    = "key"    // the provider refused the key
	MarkCredit = "credit" // the provider account is out of credit
)

func (h *Health) get(id string) *credHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.creds[id]
	if !ok {
		c = &credHealth{}
		c.breaker = gobreaker.NewCircuitBreaker[Status](gobreaker.Settings{
			Name:        id,
			MaxRequests: 1,
			Timeout:     h.cfg.Cooldown,
			ReadyToTrip: func(n gobreaker.Counts) bool { return int(n.ConsecutiveFailures) >= h.cfg.Failures },
			IsSuccessful: func(err error) bool {
				return !failure(err)
			},
			OnStateChange: func(name string, from, to gobreaker.State) {
				if to == gobreaker.StateOpen {
					h.mu.Lock()
					c.openedAt = h.cfg.Now()
					h.mu.Unlock()
				}
				h.cfg.Log.Warn("upstream credential circuit breaker", "credential", name, "from", from.String(), "to", to.String())
			},
		})
		h.creds[id] = c
	}
	return c
}

// Submit runs a submission through the credential's breaker. While the breaker is open the submission is
// not made and the answer is ErrTransient: the task keeps its credential and is retried later.
func (h *Health) Submit(id string, fn func() (Status, error)) (Status, error) {
	c := h.get(id)
	start := h.cfg.Now()
	st, err := c.breaker.Execute(fn)
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return st, fmt.Errorf("%w (%v)", ErrNotSent, err)
	}
	h.record(c, h.cfg.Now().Sub(start), err)
	return st, err
}

// Call counts a poll or download (they go to a task's own credential whatever its breaker says: the
// task is already upstream).
func (h *Health) Call(id string, fn func() (Status, error)) (Status, error) {
	c := h.get(id)
	start := h.cfg.Now()
	st, err := fn()
	h.record(c, h.cfg.Now().Sub(start), err)
	return st, err
}

func (h *Health) record(c *credHealth, took time.Duration, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	x := call{took: took, failed: failure(err)}
	if len(c.calls) < h.cfg.Window {
		c.calls = append(c.calls, x)
	} else {
		c.calls[c.next] = x
		c.next = (c.next + 1) % h.cfg.Window
	}
	if x.failed {
		c.lastErr, _ = storetext.Clip(err.Error(), 500)
		c.lastAt = h.cfg.Now()
	}
}

// Healthy reports whether the credential may take a new task on this instance: the provider has not
// refused its key, and its breaker is closed — or half-open with no probe under way yet, so that a new
// task may be the probe of a credential that holds no task to retry.
func (h *Health) Healthy(id string) bool {
	c := h.get(id)
	h.mu.Lock()
	auth, remote := c.authErr, c.remoteOpen
	h.mu.Unlock()
	if auth != "" || remote {
		return false
	}
	switch c.breaker.State() {
	case gobreaker.StateClosed:
		return true
	case gobreaker.StateHalfOpen:
		return c.breaker.Counts().Requests == 0
	}
	return false
}

// RetryAfter is when a new task might be taken by an unhealthy credential: the rest of its breaker's
// cooldown, or a minute for a refused key (an operator has to act).
func (h *Health) RetryAfter(id string) time.Duration {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.authErr != "" {
		return time.Minute
	}
	left := h.cfg.Cooldown - h.cfg.Now().Sub(c.openedAt)
	return max(left, time.Second)
}

// MarkAuthFailed records that the provider refused the credential's key.
func (h *Health) MarkAuthFailed(id, msg string) { h.Mark(id, MarkKey, msg) }

// Mark records a lasting refusal of the credential (MarkKey or MarkCredit): it takes no new task until a
// reload clears the mark.
func (h *Health) Mark(id, kind, msg string) {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if msg == "" {
		msg = "the provider refused the key"
		if kind == MarkCredit {
			msg = "the provider account is out of credit"
		}
	}
	c.authErr, c.authKind, c.authAt = msg, kind, h.cfg.Now()
}

// ClearAuth forgets a refused key (the credential was reloaded).
func (h *Health) ClearAuth(id string) {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	c.authErr, c.authKind = "", ""
}

// CloseRoute records that the provider refused the credential's route for alias (the model is not
// served or not activated for this key): that route takes no new task on this instance until a reload
// (Pool.Replace) clears it. The credential's other routes are untouched.
func (h *Health) CloseRoute(id, alias, msg string) {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.closed == nil {
		c.closed = map[string]string{}
	}
	c.closed[alias] = msg
}

// RouteOpen reports whether the credential's route for alias may take new tasks.
func (h *Health) RouteOpen(id, alias string) bool {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	_, closed := c.closed[alias]
	return !closed
}

// reopenRoutes forgets every closed route of the credential.
func (h *Health) reopenRoutes(id string) {
	c := h.get(id)
	h.mu.Lock()
	defer h.mu.Unlock()
	c.closed = nil
}

// Snapshot is one credential's health on this instance.
type Snapshot struct {
	Breaker       string
	Calls, Errors int64
	P50, P95, P99 time.Duration
	LastError     string
	LastErrorAt   time.Time
	AuthError     string
	AuthKind      string            // MarkKey or MarkCredit when AuthError is set
	ClosedRoutes  map[string]string // alias → why the provider refused that route
}

// Snapshot returns the credential's health now.
func (h *Health) Snapshot(id string) Snapshot {
	c := h.get(id)
	state := c.breaker.State().String()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{Breaker: state, LastError: c.lastErr, LastErrorAt: c.lastAt, AuthError: c.authErr, AuthKind: c.authKind, Calls: int64(len(c.calls))}
	for alias, why := range c.closed {
		if s.ClosedRoutes == nil {
			s.ClosedRoutes = map[string]string{}
		}
		s.ClosedRoutes[alias] = why
	}
	took := make([]time.Duration, 0, len(c.calls))
	for _, x := range c.calls {
		took = append(took, x.took)
		if x.failed {
			s.Errors++
		}
	}
	slices.Sort(took)
	s.P50, s.P95, s.P99 = percentile(took, 50), percentile(took, 95), percentile(took, 99)
	return s
}

// closedRoutesText is ClosedRoutes as upstream_health keeps it: "alias: why" lines, sorted.
func (s Snapshot) closedRoutesText() string {
	lines := make([]string, 0, len(s.ClosedRoutes))
	for alias, why := range s.ClosedRoutes {
		lines = append(lines, alias+": "+strings.ReplaceAll(why, "\n", " "))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100
	return sorted[max(rank, 1)-1]
}

// Publish writes this instance's view of each of ids to upstream_health, then refreshes what it knows
// from the other instances (Refresh).
func (h *Health) Publish(ctx context.Context, d *db.DB, ids []string, fresh time.Duration) error {
	now := h.cfg.Now().UTC()
	rows := make([]models.UpstreamHealth, 0, len(ids))
	for _, id := range ids {
		s := h.Snapshot(id)
		r := models.UpstreamHealth{CredentialID: id, Instance: h.cfg.Instance, Breaker: s.Breaker, Calls: s.Calls, Errors: s.Errors,
			P50Ms: s.P50.Milliseconds(), P95Ms: s.P95.Milliseconds(), P99Ms: s.P99.Milliseconds(), LastError: s.LastError,
			ClosedRoutes: s.closedRoutesText(), UpdatedAt: now}
		if !s.LastErrorAt.IsZero() {
			at := s.LastErrorAt.UTC()
			r.LastErrorAt = &at
		}
		rows = append(rows, r)
	}
	if len(rows) > 0 {
		err := d.W.WithContext(ctx).Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "credential_id"}, {Name: "instance"}},
			DoUpdates: clause.AssignmentColumns([]string{"breaker", "calls", "errors", "p50_ms", "p95_ms", "p99_ms", "last_error", "last_error_at", "closed_routes", "updated_at"}),
		}).Create(&rows).Error
		if err != nil {
			return fmt.Errorf("publish upstream health: %w", err)
		}
	}
	return h.Refresh(ctx, d, ids, fresh)
}

// Refresh reads which keys any instance found refused, and which breakers other instances published as
// open within fresh, so this instance gives those credentials no new task either (and an instance that
// only answers the API, never submitting, still refuses creates no task could start).
func (h *Health) Refresh(ctx context.Context, d *db.DB, ids []string, fresh time.Duration) error {
	started := h.cfg.Now()
	var creds []models.UpstreamCredential
	if err := d.R.WithContext(ctx).Select("id", "auth_error", "auth_error_kind").Where("id IN ?", ids).Find(&creds).Error; err != nil {
		return fmt.Errorf("read refused upstream keys: %w", err)
	}
	var open []models.UpstreamHealth
	if err := d.R.WithContext(ctx).Select("credential_id", "updated_at").
		Where("credential_id IN ? AND instance <> ? AND breaker = ?", ids, h.cfg.Instance, gobreaker.StateOpen.String()).Find(&open).Error; err != nil {
		return fmt.Errorf("read other instances' breakers: %w", err)
	}
	remote := map[string]bool{}
	for _, o := range open {
		// Compared in Go: SQLite keeps times as text in the zone they were written in.
		if started.Sub(o.UpdatedAt) <= fresh {
			remote[o.CredentialID] = true
		}
	}
	for _, r := range creds {
		c := h.get(r.ID)
		h.mu.Lock()
		switch {
		case r.AuthError != nil && c.authErr == "":
			c.authErr, c.authKind, c.authAt = *r.AuthError, MarkKey, started
			if r.AuthErrorKind != nil {
				c.authKind = *r.AuthErrorKind
			}
		case r.AuthError == nil && c.authErr != "" && c.authAt.Before(started):
			// Cleared by a reload somewhere; a mark set here after the read began is newer than what was read.
			c.authErr, c.authKind = "", ""
		}
		c.remoteOpen = remote[r.ID]
		h.mu.Unlock()
	}
	return nil
}
