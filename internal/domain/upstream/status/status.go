// Package status reads the upstream pool's state for operators (`videogen upstreams status`): each
// credential's row merged with what every live instance last reported about its health.
package status

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"videogen/internal/infra/db"
	"videogen/models"
)

// DefaultFresh is how recent an instance's health report must be to count. Instances write theirs every
// few seconds, so a report older than this is from an instance that stopped, or lost the database.
const DefaultFresh = time.Minute

// What a credential's State says.
const (
	StateInService = "in service"
	StateOut       = "not taking new tasks (removed or draining)"
	StateRefused   = "unhealthy: the provider refused the key"
	StateNoCredit  = "unhealthy: the provider account is out of credit"
)

// The circuit breaker's states as instances report them, and Unknown when no live instance reported.
const (
	BreakerClosed   = "closed"
	BreakerHalfOpen = "half-open"
	BreakerOpen     = "open"
	BreakerUnknown  = "unknown"
)

// MaxErrorText is how many characters of an error Read returns: enough to recognise it, and a provider
// answering with a whole HTML page must not flood the terminal.
const MaxErrorText = 200

// Row is one credential. It holds no secret: the database has none (credentials' keys stay in the
// environment of the instances), and Read selects its columns by name, so a column added later is not
// shown unless someone adds it here.
type Row struct {
	ID      string `json:"id"`
	Name    string `json:"name"` // the operator's label
	Kind    string `json:"kind"` // the protocol: sim, openai, ark
	BaseURL string `json:"base_url"`
	Enabled bool   `json:"enabled"`
	State   string `json:"state"` // StateInService, StateOut, StateRefused or StateNoCredit
	// Breaker is the worst circuit breaker among the live instances (open, then half-open, then closed):
	// one instance refusing to send to the credential is worth seeing. BreakerUnknown when none reported.
	Breaker        string `json:"breaker"`
	InFlight       int    `json:"in_flight"`
	MaxConcurrency int    `json:"max_concurrency"`
	// Calls and Errors are summed over the live instances' windows.
	Calls  int64 `json:"calls"`
	Errors int64 `json:"errors"`
	// ErrorPermille is Errors per thousand Calls, rounded half up (0 without calls).
	ErrorPermille int64 `json:"error_permille"`
	// The latency percentiles are the worst live instance's: percentiles of separate windows cannot be
	// combined into the pool's without the samples, and the worst is the one to look into.
	P50Ms int64 `json:"p50_ms"`
	P95Ms int64 `json:"p95_ms"`
	P99Ms int64 `json:"p99_ms"`
	// LastError is the newest error any live instance reported, clipped to MaxErrorText characters. The
	// writer redacted it already.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// AuthError is why the provider refused the key, when it did; clipped like LastError.
	AuthError   string     `json:"auth_error,omitempty"`
	AuthErrorAt *time.Time `json:"auth_error_at,omitempty"`
	// ClosedRoutes are the model aliases whose route the provider refused for this key on some live
	// instance (not served, not activated), with why: only those take no new task, until a reload.
	ClosedRoutes map[string]string `json:"closed_routes,omitempty"`
	// Instances is how many instances reported on the credential within the freshness window.
	Instances int `json:"instances"`
}

// ErrorRate is ErrorPermille as a percentage with one decimal, "12.5%"; "–" without calls.
func (r Row) ErrorRate() string {
	if r.Calls == 0 {
		return "–"
	}
	return fmt.Sprintf("%d.%d%%", r.ErrorPermille/10, r.ErrorPermille%10)
}

// Read returns every credential of upstream_credentials — configured now or not — by name, with the
// health reports of the instances that wrote theirs within fresh of now (DefaultFresh when fresh is not
// positive); older reports are ignored.
func Read(ctx context.Context, d *db.DB, now time.Time, fresh time.Duration) ([]Row, error) {
	if fresh <= 0 {
		fresh = DefaultFresh
	}
	r := d.R.WithContext(ctx)
	var creds []models.UpstreamCredential
	if err := r.Select("id", "provider", "label", "base_url", "enabled", "in_flight", "max_concurrency", "auth_error", "auth_error_at", "auth_error_kind").
		Order("label, id").Find(&creds).Error; err != nil {
		return nil, fmt.Errorf("read upstream credentials: %w", err)
	}
	// Every report is read and the stale ones dropped here rather than in SQL: SQLite compares stored
	// times as text in the offset each was written with, and the table is small (a row per credential and
	// instance; Stale deletes old ones).
	var health []models.UpstreamHealth
	if err := r.Order("credential_id, instance").Find(&health).Error; err != nil {
		return nil, fmt.Errorf("read upstream health: %w", err)
	}
	byCred := map[string][]models.UpstreamHealth{}
	cutoff := now.Add(-fresh)
	for _, h := range health {
		if !h.UpdatedAt.Before(cutoff) {
			byCred[h.CredentialID] = append(byCred[h.CredentialID], h)
		}
	}
	rows := make([]Row, 0, len(creds))
	for _, c := range creds {
		rows = append(rows, merge(c, byCred[c.ID]))
	}
	// Sorted here as well: PostgreSQL orders labels by its collation, SQLite by bytes.
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].Name < rows[j].Name || rows[i].Name == rows[j].Name && rows[i].ID < rows[j].ID
	})
	return rows, nil
}

// merge is one credential's row with its live instances' reports.
func merge(c models.UpstreamCredential, reports []models.UpstreamHealth) Row {
	row := Row{ID: c.ID, Name: c.Label, Kind: c.Provider, BaseURL: c.BaseURL, Enabled: c.Enabled,
		InFlight: c.InFlight, MaxConcurrency: c.MaxConcurrency, Breaker: BreakerUnknown, Instances: len(reports)}
	switch {
	case c.AuthError != nil && *c.AuthError != "":
		row.State = StateRefused
		if c.AuthErrorKind != nil && *c.AuthErrorKind == "credit" {
			row.State = StateNoCredit
		}
		row.AuthError = Clip(*c.AuthError)
		row.AuthErrorAt = utc(c.AuthErrorAt)
	case c.Enabled:
		row.State = StateInService
	default:
		row.State = StateOut
	}
	for i, h := range reports {
		if i == 0 || breakerRank(h.Breaker) > breakerRank(row.Breaker) {
			row.Breaker = h.Breaker
		}
		row.Calls += h.Calls
		row.Errors += h.Errors
		row.P50Ms = max(row.P50Ms, h.P50Ms)
		row.P95Ms = max(row.P95Ms, h.P95Ms)
		row.P99Ms = max(row.P99Ms, h.P99Ms)
		for _, line := range strings.Split(h.ClosedRoutes, "\n") {
			if alias, why, ok := strings.Cut(line, ": "); ok {
				if row.ClosedRoutes == nil {
					row.ClosedRoutes = map[string]string{}
				}
				row.ClosedRoutes[alias] = Clip(why)
			}
		}
		if h.LastError != "" && (row.LastErrorAt == nil || h.LastErrorAt != nil && h.LastErrorAt.After(*row.LastErrorAt)) {
			row.LastError, row.LastErrorAt = Clip(h.LastError), utc(h.LastErrorAt)
		}
	}
	if row.Calls > 0 {
		row.ErrorPermille = (row.Errors*1000 + row.Calls/2) / row.Calls
	}
	return row
}

// breakerRank orders breaker states from healthy to not. A state this package does not know ranks
// above open: an instance reporting something unexpected should not hide behind a closed one.
func breakerRank(b string) int {
	switch b {
	case BreakerClosed:
		return 1
	case BreakerHalfOpen:
		return 2
	case BreakerOpen:
		return 3
	default:
		return 4
	}
}

// Clip shortens s to MaxErrorText characters, ending it with "…" when it cut something; it never cuts a
// character in two.
func Clip(s string) string {
	if utf8.RuneCountInString(s) <= MaxErrorText {
		return s
	}
	n := 0
	for i := range s {
		if n == MaxErrorText-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Stale deletes the health reports no instance has updated for older than older before now (instances
// that stopped, or were renamed), and returns how many it deleted. Read ignores them anyway; this keeps
// the table to the instances alive.
func Stale(ctx context.Context, d *db.DB, now time.Time, older time.Duration) (int64, error) {
	if older <= 0 {
		return 0, fmt.Errorf("delete stale upstream health: the age must be positive, not %s", older)
	}
	// julianday() compares the instants on SQLite, whatever offset each time was written with; text
	// would compare the digits.
	where := "updated_at < ?"
	if !d.Postgres {
		where = "julianday(updated_at) < julianday(?)"
	}
	res := d.W.WithContext(ctx).Where(where, now.Add(-older).UTC()).Delete(&models.UpstreamHealth{})
	if res.Error != nil {
		return 0, fmt.Errorf("delete stale upstream health: %w", res.Error)
	}
	return res.RowsAffected, nil
}
