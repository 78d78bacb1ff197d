package billing

import (
	"context"
	"fmt"
	"sync"
	"time"

	"gorm.io/gorm/clause"

	"videogen/internal/catalog"
	"videogen/internal/db"
	"videogen/models"
)

// DefaultPrices is the price per second of output of each model (docs/design.md §3), seeded into the database
// once; an admin edits the stored table afterwards.
var DefaultPrices = map[string]Micros{
	"videogen-2.0-480p":       150_000,
	"videogen-2.0-720p":       300_000,
	"videogen-2.0-1080p":      700_000,
	"videogen-2.0-fast-480p":  100_000,
	"videogen-2.0-fast-720p":  200_000,
	"videogen-2.0-fast-1080p": 450_000,
	"videogen-2.0-mini-480p":  50_000,
	"videogen-2.0-mini-720p":  100_000,
}

// SeedPrices stores the default price of every model that has none yet.
func SeedPrices(ctx context.Context, d *db.DB, now time.Time) error {
	rows := make([]models.Price, 0, len(catalog.Models))
	for _, m := range catalog.Models {
		rows = append(rows, models.Price{Model: m.ID, MicrosPerSecond: int64(DefaultPrices[m.ID]), UpdatedAt: now})
	}
	err := d.W.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&rows).Error
	if err != nil {
		return fmt.Errorf("seed prices: %w", err)
	}
	return nil
}

// Prices reads the price table, keeping it in memory for a few seconds: it is read on every create and
// changes rarely. A task freezes the price it read, so a change never touches existing tasks.
type Prices struct {
	db  *db.DB
	ttl time.Duration

	mu      sync.Mutex
	byModel map[string]Micros
	loaded  time.Time
}

// NewPrices returns the price table reader.
func NewPrices(d *db.DB) *Prices { return &Prices{db: d, ttl: 5 * time.Second} }

// PerSecond returns the model's current price per second of output.
func (p *Prices) PerSecond(ctx context.Context, model string) (Micros, error) {
	all, err := p.All(ctx)
	if err != nil {
		return 0, err
	}
	price, ok := all[model]
	if !ok {
		return 0, fmt.Errorf("no price for model %s", model)
	}
	return price, nil
}

// All returns model → price per second.
func (p *Prices) All(ctx context.Context) (map[string]Micros, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byModel != nil && time.Since(p.loaded) < p.ttl {
		return p.byModel, nil
	}
	var rows []models.Price
	if err := p.db.R.WithContext(ctx).Find(&rows).Error; err != nil {
		if p.byModel != nil {
			return p.byModel, nil // a passing read error should not stop sales at known prices
		}
		return nil, fmt.Errorf("load prices: %w", err)
	}
	m := make(map[string]Micros, len(rows))
	for _, r := range rows {
		m[r.Model] = Micros(r.MicrosPerSecond)
	}
	p.byModel, p.loaded = m, time.Now()
	return m, nil
}

// Invalidate drops the cached table, after an admin edit.
func (p *Prices) Invalidate() {
	p.mu.Lock()
	p.byModel = nil
	p.mu.Unlock()
}
