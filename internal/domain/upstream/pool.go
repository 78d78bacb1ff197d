package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// Pool is the operator's credentials, reloadable while running, with their health. Which credential has
// a free slot is decided in the database (the task store counts in_flight there), so several instances
// share one count; health (circuit breakers, latencies) is each instance's own, written to the database
// for the operator.
//
// A credential removed by a reload is retired, not forgotten: it takes no new task, but the tasks it
// holds are polled and copied with it, and its secret, until they end (docs/upstreams.md#reload).
type Pool struct {
	db     *db.DB
	Health *Health

	mu      sync.RWMutex
	creds   map[string]Credential // as configured now, draining ones included
	retired map[string]Credential // removed by a reload while this process runs

	// markMu orders lasting refusal marks (note) with a reload's clearing of them (Sync): a refusal of a
	// call sent before the operator's reload is stale — the key it refused was fixed since — and must
	// not mark the credential again after the reload cleared it.
	markMu   sync.Mutex
	reloaded map[string]time.Time // credential id → when a reload last cleared its marks
}

// NewPool makes a pool of creds; its health is tracked by h.
func NewPool(d *db.DB, h *Health, creds []Credential) *Pool {
	p := &Pool{db: d, Health: h, retired: map[string]Credential{}, reloaded: map[string]time.Time{}}
	p.creds = index(creds)
	return p
}

func index(creds []Credential) map[string]Credential {
	m := make(map[string]Credential, len(creds))
	for _, c := range creds {
		m[c.ID] = c
	}
	return m
}

// CredentialID is the stable id of a credential given by its secret alone (the built-in simulator's and
// the UPSTREAM_API_KEYS credentials): a short digest, never the secret.
func CredentialID(provider, secret string) string {
	sum := sha256.Sum256([]byte(provider + "\x00" + secret))
	return provider + "-" + hex.EncodeToString(sum[:6])
}

// Replace installs a reloaded set of credentials. Credentials no longer in it are retired: their
// tasks keep using them. A retired credential configured again comes back with its new settings.
func (p *Pool) Replace(creds []Credential) (added, removed []string) {
	next := index(creds)
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, c := range p.creds {
		if _, ok := next[id]; !ok {
			p.retired[id] = c
			removed = append(removed, id)
		}
	}
	for id := range next {
		if _, ok := p.creds[id]; !ok {
			added = append(added, id)
		}
		delete(p.retired, id)
		// A reload is the operator saying the routes are fixed (a model activated, a name corrected).
		p.Health.reopenRoutes(id)
	}
	p.creds = next
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed
}

// Credential returns the credential with this id, configured or retired: a task's every call uses the
// credential that took it.
func (p *Pool) Credential(id string) (Credential, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if c, ok := p.creds[id]; ok {
		return c, true
	}
	c, ok := p.retired[id]
	return c, ok
}

// Configured lists the configured credentials, by id.
func (p *Pool) Configured() []Credential {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]Credential, 0, len(p.creds))
	for _, c := range p.creds {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// IDs lists the credentials that take new tasks (configured, not draining), sorted.
func (p *Pool) IDs() []string {
	var out []string
	for _, c := range p.Configured() {
		if !c.Draining {
			out = append(out, c.ID)
		}
	}
	return out
}

// Candidates lists the credentials a new task for req may go to: configured, not draining, serving its
// alias on a route the provider has not refused and that can render it, accepting its inputs, and
// healthy on this instance (breaker not open, key not refused, account not out of credit). The database then picks the least
// loaded of them with a free slot.
func (p *Pool) Candidates(req models.VideoRequest) []string {
	var out []string
	for _, c := range p.Configured() {
		if !p.routeUsable(c, req.Model) || !c.Models[req.Model].Caps.Renders(req) || !p.Health.Healthy(c.ID) {
			continue
		}
		out = append(out, c.ID)
	}
	return out
}

// routeUsable reports whether the credential's route for alias may be given new tasks at all: the
// credential is configured and not draining, serves the alias, and the provider has not refused the
// route. The credential's health (a breaker, a refused key, no credit) is asked separately: an unhealthy
// credential makes a create wait or answer 503 with a time to retry, while what no usable route renders
// is refused for good.
func (p *Pool) routeUsable(c Credential, alias string) bool {
	return !c.Draining && c.Serves(alias) && p.Health.RouteOpen(c.ID, alias)
}

// Offer is what an alias can be sold with now: the union of what its usable routes render.
type Offer struct {
	Seconds []int
	Sizes   map[string]string // aspect ratio → size, for the alias's sizes some route renders
	Inputs  []string          // in the API's order
	Audio   bool
	// Rules are the coupling rules of the routes, in words ("first + last frame: 8 s only"), each once,
	// in the order the routes list them.
	Rules []string
}

// Offer returns what alias can be sold with now (GET /v1/models, /pricing); sizes is the alias's own,
// ratio → size, from the catalog. ok is false when no route is usable.
func (p *Pool) Offer(alias string, sizes map[string]string) (Offer, bool) {
	o := Offer{Sizes: map[string]string{}, Seconds: []int{}, Inputs: []string{}, Rules: []string{}}
	found := false
	seconds := map[int]bool{}
	inputs := map[string]bool{}
	for _, c := range p.Configured() {
		caps := c.Models[alias].Caps
		if !p.routeUsable(c, alias) || len(caps.SellableSizes(valuesOf(sizes))) == 0 {
			continue // a route that renders none of the alias's sizes sells nothing
		}
		found = true
		for _, n := range caps.Seconds {
			seconds[n] = true
		}
		for ratio, size := range sizes {
			if caps.RendersSize(size) {
				o.Sizes[ratio] = size
			}
		}
		for _, in := range caps.Inputs {
			inputs[in] = true
		}
		o.Audio = o.Audio || caps.Audio
		for _, words := range caps.Notes {
			if !slices.Contains(o.Rules, words) {
				o.Rules = append(o.Rules, words)
			}
		}
		for _, r := range caps.Rules {
			if !slices.Contains(o.Rules, r.Words) && slices.ContainsFunc(r.IfInputs, caps.Takes) {
				o.Rules = append(o.Rules, r.Words)
			}
		}
	}
	if !found {
		return Offer{}, false
	}
	for n := range seconds {
		o.Seconds = append(o.Seconds, n)
	}
	sort.Ints(o.Seconds)
	for _, in := range Inputs {
		if inputs[in] {
			o.Inputs = append(o.Inputs, in)
		}
	}
	return o, true
}

func valuesOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// Aliases lists the aliases served by the credentials with these ids.
func (p *Pool) Aliases(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		c, ok := p.Credential(id)
		if !ok {
			continue
		}
		for a := range c.Models {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// UnsupportedError refuses a request every credential for its alias would refuse: a value no route
// renders (Code CodeUnsupportedValue) or inputs an Ark model cannot combine (Code empty). Param names
// the field to change.
type UnsupportedError struct {
	Code    string
	Param   string
	Message string
}

func (e *UnsupportedError) Error() string { return e.Message }

// NoCapacityError says no credential serving the alias is healthy: a task created now could not start.
type NoCapacityError struct{ RetryAfter time.Duration }

func (e *NoCapacityError) Error() string {
	return fmt.Sprintf("no healthy upstream capacity; retry after %s", e.RetryAfter)
}

// ErrNotServed: no configured credential serves the alias at all.
var ErrNotServed = errors.New("no upstream credential serves this model")

// Admit decides whether a task for req may be created: some credential taking new tasks serves its
// alias on a usable route, some of those routes can render it (seconds, size, inputs, sound: refused
// with CodeUnsupportedValue, naming the field and what is accepted), some of those accepts its input
// combination, and some of those is healthy. Credentials that are merely full are fine: the task waits
// in the account's bounded backlog for a slot (docs/upstreams.md#routing).
func (p *Pool) Admit(req models.VideoRequest) error {
	var usable []Credential
	var caps []Capabilities
	for _, c := range p.Configured() {
		if p.routeUsable(c, req.Model) {
			usable = append(usable, c)
			caps = append(caps, c.Models[req.Model].Caps)
		}
	}
	if len(usable) == 0 {
		// Not served, or every route refused by the provider: unavailable until an operator acts.
		return ErrNotServed
	}
	if err := Refusal(caps, req); err != nil {
		return err
	}
	var accepting []Credential
	for _, c := range usable {
		if c.Models[req.Model].Caps.Renders(req) {
			accepting = append(accepting, c)
		}
	}
	wait := time.Duration(0)
	for _, c := range accepting {
		if p.Health.Healthy(c.ID) {
			return nil
		}
		if d := p.Health.RetryAfter(c.ID); wait == 0 || d < wait {
			wait = d
		}
	}
	return &NoCapacityError{RetryAfter: wait}
}

// Submit, Poll and Download call the credential's provider, counting each call in the credential's
// health (submissions also through its circuit breaker) and keeping its secret out of every error.

// Submit sends a task upstream.
func (p *Pool) Submit(ctx context.Context, cred Credential, req SubmitRequest) (Status, error) {
	sent := time.Now()
	st, err := p.Health.Submit(cred.ID, func() (Status, error) {
		st, err := cred.Provider.Submit(ctx, cred, req)
		return st, Redact(err, cred.Secret) // before Health keeps it as the last error
	})
	if errors.Is(err, ErrRoute) {
		// Only this model is refused for this key (not served, not activated): the route stops taking
		// tasks, the credential's other routes go on.
		msg, _ := storetext.Clip(Redact(err, cred.Secret).Error(), 500)
		p.Health.CloseRoute(cred.ID, req.Model, msg)
	}
	return st, p.note(ctx, cred, sent, err)
}

// Poll reads a task's upstream state.
func (p *Pool) Poll(ctx context.Context, cred Credential, upstreamID string) (Status, error) {
	sent := time.Now()
	st, err := p.Health.Call(cred.ID, func() (Status, error) {
		st, err := cred.Provider.Poll(ctx, cred, upstreamID)
		st.ErrorMessage = RedactText(st.ErrorMessage, cred.Secret)
		return st, Redact(err, cred.Secret)
	})
	return st, p.note(ctx, cred, sent, err)
}

// Download streams a finished task's video.
func (p *Pool) Download(ctx context.Context, cred Credential, upstreamID string) (io.ReadCloser, int64, error) {
	var body io.ReadCloser
	var size int64
	sent := time.Now()
	_, err := p.Health.Call(cred.ID, func() (Status, error) {
		var err error
		body, size, err = cred.Provider.Download(ctx, cred, upstreamID)
		return Status{}, Redact(err, cred.Secret)
	})
	return body, size, p.note(ctx, cred, sent, err)
}

// DownloadStill streams a still variant of a finished task from its credential's provider. ok is false
// when the provider serves none. A failure here does not count against the credential's health: the
// video, already copied, is what was paid for.
func (p *Pool) DownloadStill(ctx context.Context, cred Credential, upstreamID, variant string) (body io.ReadCloser, contentType string, size int64, ok bool, err error) {
	src, ok := cred.Provider.(StillSource)
	if !ok {
		return nil, "", 0, false, nil
	}
	body, contentType, size, err = src.DownloadStill(ctx, cred, upstreamID, variant)
	return body, contentType, size, true, Redact(err, cred.Secret)
}

// MayCancel reports whether a task the credential took, in our status, could be stopped by its
// provider now: a provider without a cancel never can; one with a CancelWindow says when; any other is
// asked. A credential no longer configured cannot be asked.
func (p *Pool) MayCancel(credentialID, status string) bool {
	cred, ok := p.Credential(credentialID)
	if !ok {
		return false
	}
	if _, ok := cred.Provider.(Canceller); !ok {
		return false
	}
	if w, ok := cred.Provider.(CancelWindow); ok {
		return w.CancelsWhile(status)
	}
	return true
}

// Cancel asks the credential's provider to stop a task we gave up on. ErrNotCancellable: the provider
// has no cancel, or cannot cancel the task in its state.
func (p *Pool) Cancel(ctx context.Context, cred Credential, upstreamID string) error {
	c, ok := cred.Provider.(Canceller)
	if !ok {
		return fmt.Errorf("%w: %s has no cancel", ErrNotCancellable, cred.Kind)
	}
	return Redact(c.Cancel(ctx, cred, upstreamID), cred.Secret)
}

// DownloadLastFrame streams the last frame of a finished task, where the provider returns one. ok is
// false when it returns none. Like a still, a failure does not count against the credential.
func (p *Pool) DownloadLastFrame(ctx context.Context, cred Credential, upstreamID string) (body io.ReadCloser, contentType string, size int64, ok bool, err error) {
	src, ok := cred.Provider.(LastFrameSource)
	if !ok {
		return nil, "", 0, false, nil
	}
	body, contentType, size, err = src.DownloadLastFrame(ctx, cred, upstreamID)
	return body, contentType, size, true, Redact(err, cred.Secret)
}

// note redacts the secret from err and, when the provider refused the key or says the account is out of
// credit, marks the credential so that no instance gives it new tasks until an operator reloads it —
// unless the call was sent before this instance's last reload of it (its answer speaks of the key as it
// was before the operator fixed it).
func (p *Pool) note(ctx context.Context, cred Credential, sent time.Time, err error) error {
	if err == nil {
		return nil
	}
	err = Redact(err, cred.Secret)
	kind := ""
	switch {
	case errors.Is(err, ErrAuth):
		kind = MarkKey
	case errors.Is(err, ErrOutOfCredit):
		kind = MarkCredit
	default:
		return err
	}
	p.markMu.Lock()
	defer p.markMu.Unlock()
	if sent.Before(p.reloaded[cred.ID]) {
		return err
	}
	// The database first, then this instance's memory: Publish, reading the database, never clears a
	// mark it has not seen.
	if p.db != nil {
		now := p.Health.cfg.Now().UTC() // the service's clock: the mark is stored and compared with stored times
		msg, _ := storetext.Clip(err.Error(), 500)
		if dbErr := p.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.UpstreamCredential{}).Where("id = ?", cred.ID).
			Updates(map[string]any{"auth_error": msg, "auth_error_at": now, "auth_error_key": KeyDigest(cred.Secret), "auth_error_kind": kind}).Error; dbErr != nil {
			err = errors.Join(err, fmt.Errorf("record the refusal of %s: %w", cred.ID, dbErr))
		}
	}
	p.Health.Mark(cred.ID, kind, err.Error())
	return err
}

// KeyDigest identifies a key without revealing it (a truncated SHA-256 of a high-entropy API key), so
// that a start with another key can tell that a refused one was replaced.
func KeyDigest(secret string) string {
	sum := sha256.Sum256([]byte("videogen upstream key\x00" + secret))
	return hex.EncodeToString(sum[:12])
}

// Redact returns err with every occurrence of secret replaced, keeping errors.Is and errors.As working.
func Redact(err error, secret string) error {
	if err == nil || len(secret) < 4 || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redacted{err: err, msg: RedactText(err.Error(), secret)}
}

// RedactText replaces every occurrence of secret in s.
func RedactText(s, secret string) string {
	if len(secret) < 4 {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// ErrIDReused: a credential id is configured with another kind or base URL than the tasks stored under
// it were made at.
var ErrIDReused = errors.New("upstream credential id reused for another upstream account")

// Check refuses credentials whose id the database knows with another kind or base URL while unfinished
// tasks are stored under it: they are polled at the account that made them, so such an id is never
// reused (give the new account a new id).
func (p *Pool) Check(ctx context.Context, creds []Credential) error {
	ids := make([]string, len(creds))
	for i, c := range creds {
		ids[i] = c.ID
	}
	var rows []models.UpstreamCredential
	if err := p.db.R.WithContext(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return fmt.Errorf("read upstream credentials: %w", err)
	}
	known := map[string]models.UpstreamCredential{}
	for _, r := range rows {
		known[r.ID] = r
	}
	var errs []error
	for _, c := range creds {
		r, ok := known[c.ID]
		if !ok || r.BaseURL == "" { // new, or recorded before base URLs were
			continue
		}
		if r.Provider != c.Kind || r.BaseURL != c.BaseURL {
			// With nothing in flight under the id there is nothing to poll elsewhere: a corrected typo
			// in a base URL is fine.
			var held int64
			if err := p.db.R.WithContext(ctx).Model(&models.Task{}).Where("credential_id = ? AND status IN ?", c.ID, tasks.Unfinished).
				Count(&held).Error; err != nil {
				return fmt.Errorf("count the tasks of %s: %w", c.ID, err)
			}
			if held == 0 {
				continue
			}
			errs = append(errs, fmt.Errorf("%w: %q was %s at %s and is now %s at %s, with %d unfinished task(s) that must be polled where they were made: give the new account a new id",
				ErrIDReused, c.ID, r.Provider, r.BaseURL, c.Kind, c.BaseURL, held))
		}
	}
	return errors.Join(errs...)
}

// Sync makes the credentials table match creds, the pool about to be installed (call it before
// Replace, so that a failure leaves both as they were): configured credentials that take new tasks are
// enabled with their concurrency; draining, retired and no longer configured ones are disabled — their
// running tasks keep their row but get no new ones. A refused-key mark is cleared where the key is not
// the one refused or, with reload (an operator saying the key was fixed), everywhere.
func (p *Pool) Sync(ctx context.Context, creds []Credential, reload bool, now time.Time) error {
	if reload {
		// From here a refusal of a call sent earlier is stale (note); a mark already written is cleared below.
		p.markMu.Lock()
		at := time.Now()
		for _, c := range creds {
			p.reloaded[c.ID] = at
		}
		p.markMu.Unlock()
	}
	err := p.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&models.UpstreamCredential{}).Where("enabled = ?", true).
			Updates(map[string]any{"enabled": false, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("disable old credentials: %w", err)
		}
		for _, c := range creds {
			res := tx.Model(&models.UpstreamCredential{}).Where("id = ?", c.ID).
				Updates(map[string]any{"enabled": !c.Draining, "max_concurrency": c.MaxConcurrency, "label": c.Name,
					"provider": c.Kind, "base_url": c.BaseURL, "updated_at": now})
			if res.Error != nil {
				return fmt.Errorf("update credential %s: %w", c.ID, res.Error)
			}
			if res.RowsAffected == 0 {
				row := &models.UpstreamCredential{ID: c.ID, Provider: c.Kind, Label: c.Name, BaseURL: c.BaseURL,
					MaxConcurrency: c.MaxConcurrency, Enabled: !c.Draining, CreatedAt: now, UpdatedAt: now}
				// Another instance starting at the same moment may insert it first; that is fine.
				if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
					return fmt.Errorf("insert credential %s: %w", c.ID, err)
				}
			}
			clear := tx.Model(&models.UpstreamCredential{}).Where("id = ? AND auth_error IS NOT NULL", c.ID)
			if !reload {
				clear = clear.Where("(auth_error_key IS NULL OR auth_error_key <> ?)", KeyDigest(c.Secret))
			}
			if err := clear.Updates(map[string]any{"auth_error": nil, "auth_error_at": nil, "auth_error_key": nil}).Error; err != nil {
				return fmt.Errorf("clear the refused key of %s: %w", c.ID, err)
			}
		}
		return nil
	})
	return err
}
