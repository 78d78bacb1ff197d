package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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
}

// NewPool makes a pool of creds; its health is tracked by h.
func NewPool(d *db.DB, h *Health, creds []Credential) *Pool {
	p := &Pool{db: d, Health: h, retired: map[string]Credential{}}
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

// Serves reports whether any credential taking new tasks serves the alias.
func (p *Pool) Serves(alias string) bool {
	for _, c := range p.Configured() {
		if !c.Draining && c.Serves(alias) {
			return true
		}
	}
	return false
}

// Candidates lists the credentials a new task for req may go to: configured, not draining, serving its
// alias, accepting its inputs, and healthy on this instance (breaker not open, key not refused). The
// database then picks the least loaded of them with a free slot.
func (p *Pool) Candidates(req models.VideoRequest) []string {
	var out []string
	for _, c := range p.Configured() {
		if c.Draining || !c.Serves(req.Model) || (c.Check != nil && c.Check(req) != nil) || !p.Health.Healthy(c.ID) {
			continue
		}
		out = append(out, c.ID)
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
// alias, some of those accepts its inputs, and some of those is healthy. Credentials that are merely
// full are fine: the task waits in the account's bounded backlog for a slot (docs/upstreams.md#routing).
func (p *Pool) Admit(req models.VideoRequest) error {
	var serving, accepting []Credential
	var refusal error
	for _, c := range p.Configured() {
		if c.Draining || !c.Serves(req.Model) {
			continue
		}
		serving = append(serving, c)
		if c.Check != nil {
			if err := c.Check(req); err != nil {
				refusal = err
				continue
			}
		}
		accepting = append(accepting, c)
	}
	if len(serving) == 0 {
		return ErrNotServed
	}
	if len(accepting) == 0 {
		return refusal
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
	st, err := p.Health.Submit(cred.ID, func() (Status, error) {
		st, err := cred.Provider.Submit(ctx, cred, req)
		return st, Redact(err, cred.Secret) // before Health keeps it as the last error
	})
	return st, p.note(ctx, cred, err)
}

// Poll reads a task's upstream state.
func (p *Pool) Poll(ctx context.Context, cred Credential, upstreamID string) (Status, error) {
	st, err := p.Health.Call(cred.ID, func() (Status, error) {
		st, err := cred.Provider.Poll(ctx, cred, upstreamID)
		st.ErrorMessage = RedactText(st.ErrorMessage, cred.Secret)
		return st, Redact(err, cred.Secret)
	})
	return st, p.note(ctx, cred, err)
}

// Download streams a finished task's video.
func (p *Pool) Download(ctx context.Context, cred Credential, upstreamID string) (io.ReadCloser, int64, error) {
	var body io.ReadCloser
	var size int64
	_, err := p.Health.Call(cred.ID, func() (Status, error) {
		var err error
		body, size, err = cred.Provider.Download(ctx, cred, upstreamID)
		return Status{}, Redact(err, cred.Secret)
	})
	return body, size, p.note(ctx, cred, err)
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

// note redacts the secret from err and, when the provider refused the key, marks the credential so that
// no instance gives it new tasks until an operator reloads it.
func (p *Pool) note(ctx context.Context, cred Credential, err error) error {
	if err == nil {
		return nil
	}
	err = Redact(err, cred.Secret)
	if errors.Is(err, ErrAuth) {
		// The database first, then this instance's memory: Publish, reading the database, never clears
		// a mark it has not seen.
		if p.db != nil {
			now := time.Now().UTC()
			msg, _ := storetext.Clip(err.Error(), 500)
			if dbErr := p.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.UpstreamCredential{}).Where("id = ?", cred.ID).
				Updates(map[string]any{"auth_error": msg, "auth_error_at": now, "auth_error_key": KeyDigest(cred.Secret)}).Error; dbErr != nil {
				err = errors.Join(err, fmt.Errorf("record the refused key of %s: %w", cred.ID, dbErr))
			}
		}
		p.Health.MarkAuthFailed(cred.ID, err.Error())
	}
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
