package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/db"
	"videogen/models"
)

// Pool is the provider and its credentials. Which credential has room is decided in the database (the
// worker counts in_flight there), so several instances share one count.
type Pool struct {
	Provider Provider
	creds    map[string]Credential
}

// NewPool makes a pool of creds on provider.
func NewPool(p Provider, creds []Credential) *Pool {
	m := make(map[string]Credential, len(creds))
	for _, c := range creds {
		m[c.ID] = c
	}
	return &Pool{Provider: p, creds: m}
}

// CredentialID is the stable id of a credential given by its secret: a short digest, never the secret.
func CredentialID(provider, secret string) string {
	sum := sha256.Sum256([]byte(provider + "\x00" + secret))
	return provider + "-" + hex.EncodeToString(sum[:6])
}

// Credential returns the credential with this id.
func (p *Pool) Credential(id string) (Credential, bool) {
	c, ok := p.creds[id]
	return c, ok
}

// IDs lists the configured credential ids, sorted.
func (p *Pool) IDs() []string {
	out := make([]string, 0, len(p.creds))
	for id := range p.creds {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Sync makes the credentials table match the configured pool: configured credentials are enabled with
// their concurrency; credentials no longer configured are disabled (their running tasks keep their row
// but get no new ones).
func (p *Pool) Sync(ctx context.Context, d *db.DB, now time.Time) error {
	return d.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&models.UpstreamCredential{}).Where("provider = ?", p.Provider.Name()).
			Updates(map[string]any{"enabled": false, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("disable old credentials: %w", err)
		}
		for _, c := range p.creds {
			res := tx.Model(&models.UpstreamCredential{}).Where("id = ?", c.ID).
				Updates(map[string]any{"enabled": true, "max_concurrency": c.MaxConcurrency, "label": c.Label, "updated_at": now})
			if res.Error != nil {
				return fmt.Errorf("update credential %s: %w", c.ID, res.Error)
			}
			if res.RowsAffected == 0 {
				row := &models.UpstreamCredential{ID: c.ID, Provider: p.Provider.Name(), Label: c.Label,
					MaxConcurrency: c.MaxConcurrency, Enabled: true, CreatedAt: now, UpdatedAt: now}
				// Another instance starting at the same moment may insert it first; that is fine.
				if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(row).Error; err != nil {
					return fmt.Errorf("insert credential %s: %w", c.ID, err)
				}
			}
		}
		return nil
	})
}
