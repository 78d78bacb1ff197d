package billing

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/domain/audit"
	"videogen/internal/domain/catalog"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/models"
)

// DefaultPrices is the price per second of output of each model (docs/design.md §3), seeded into the database
// once; an admin edits the stored table afterwards.
var DefaultPrices = map[string]money.Micros{
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

// Prices reads the price table. It keeps no copy: the table is eight rows read by primary key, and an
// admin's change must show at once on every instance — on /pricing, on /v1/models and in the price a
// new task is charged — so each read asks the database (see the benchmark in prices_test.go for its
// cost). A task freezes the price it read, so a change never touches existing tasks.
type Prices struct {
	db *db.DB
}

// NewPrices returns the price table reader.
func NewPrices(d *db.DB) *Prices { return &Prices{db: d} }

// PerSecond returns the model's current price per second of output. It is on every create's path, so it
// runs one prepared statement on the driver without GORM's reflection (about half the cost).
func (p *Prices) PerSecond(ctx context.Context, model string) (money.Micros, error) {
	sqlDB, err := p.db.R.DB()
	if err != nil {
		return 0, fmt.Errorf("read the price of %s: %w", model, err)
	}
	q := "SELECT micros_per_second FROM prices WHERE model = ?"
	if p.db.Postgres {
		q = "SELECT micros_per_second FROM prices WHERE model = $1"
	}
	var v int64
	switch err := sqlDB.QueryRowContext(ctx, q, model).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("no price for model %s", model)
	case err != nil:
		return 0, fmt.Errorf("read the price of %s: %w", model, err)
	}
	return money.Micros(v), nil
}

// All returns model → price per second.
func (p *Prices) All(ctx context.Context) (map[string]money.Micros, error) {
	rows, err := PriceRows(ctx, p.db.R)
	if err != nil {
		return nil, err
	}
	m := make(map[string]money.Micros, len(rows))
	for _, r := range rows {
		m[r.Model] = money.Micros(r.MicrosPerSecond)
	}
	return m, nil
}

// PriceRows reads the stored table with who set each price and when, in the catalog's order.
func PriceRows(ctx context.Context, q *gorm.DB) ([]models.Price, error) {
	var rows []models.Price
	if err := q.WithContext(ctx).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("load prices: %w", err)
	}
	order := make(map[string]int, len(catalog.Models))
	for i, m := range catalog.Models {
		order[m.ID] = i
	}
	sort.Slice(rows, func(i, j int) bool { return order[rows[i].Model] < order[rows[j].Model] })
	return rows, nil
}

// MaxPricePerSecond bounds a price an admin may set: far above any real price, it catches a slipped digit.
const MaxPricePerSecond = 1000 * money.PerUSD

// ParsePrice reads a price per second typed in dollars for a model of the catalog.
func ParsePrice(model, typed string) (money.Micros, error) {
	if _, ok := catalog.Lookup(model); !ok {
		return 0, invalid("There is no model %q.", model)
	}
	m, err := money.ParseUSD(typed)
	switch {
	case strings.TrimSpace(typed) == "":
		return 0, invalid("Enter a price for %s.", model)
	case err != nil:
		return 0, invalid("The price of %s must be dollars per second with at most six decimals, such as 0.300000 (not %q).", model, strings.TrimSpace(typed))
	case m <= 0:
		return 0, invalid("The price of %s must be more than zero.", model)
	case m > MaxPricePerSecond:
		return 0, invalid("The price of %s is over %s per second. Check it.", model, MaxPricePerSecond.USD())
	}
	return m, nil
}

// PriceChange is one model's new price and the price the admin saw when deciding it.
type PriceChange struct {
	Model    string
	Old, New money.Micros
}

// PriceFormRow is one model's row of an admin's price form, read against the stored table.
type PriceFormRow struct {
	Model string
	Typed string       // the price as typed (trimmed), or the stored one when the form left the row out
	Seen  money.Micros // the price the change is based on: the one the form was shown with, else the stored one
	Error string       // why Typed cannot be used; "" when it can
}

// PriceEdits is what an admin's price form asks: each stored model's row, the models it names that the
// catalog does not have, and the changes — the rows whose typed price differs from the one seen.
type PriceEdits struct {
	Rows    []PriceFormRow
	Unknown []string
	Changes []PriceChange
}

// Valid reports whether the form can be applied as it is: no unknown model, no row in error.
func (e PriceEdits) Valid() bool {
	if len(e.Unknown) > 0 {
		return false
	}
	for _, r := range e.Rows {
		if r.Error != "" {
			return false
		}
	}
	return true
}

// ReadPriceEdits reads an admin's price form: typed maps a model to the price typed for it, seen to the
// price the form was shown with (so a change someone made meanwhile is caught by SetPrices, not
// silently undone). A stored model the form leaves out stays as it is; a model it names that does not
// exist is listed, not ignored: the admin meant something by it.
func ReadPriceEdits(stored []models.Price, typed, seen map[string]string) PriceEdits {
	var e PriceEdits
	for _, p := range stored {
		r := PriceFormRow{Model: p.Model, Typed: money.Micros(p.MicrosPerSecond).String(), Seen: money.Micros(p.MicrosPerSecond)}
		if was, err := strconv.ParseInt(seen[p.Model], 10, 64); err == nil {
			r.Seen = money.Micros(was)
		}
		if t, ok := typed[p.Model]; ok {
			r.Typed = strings.TrimSpace(t)
			m, err := ParsePrice(p.Model, r.Typed)
			var ie *InvalidError
			switch {
			case errors.As(err, &ie):
				r.Error = ie.Msg
			case err == nil && m != r.Seen:
				e.Changes = append(e.Changes, PriceChange{Model: p.Model, Old: r.Seen, New: m})
			}
		}
		e.Rows = append(e.Rows, r)
	}
	for name := range typed {
		if _, ok := catalog.Lookup(name); !ok {
			e.Unknown = append(e.Unknown, name)
		}
	}
	sort.Strings(e.Unknown)
	return e
}

// ErrPriceChanged is returned when a price is no longer the one the admin saw: someone else changed it
// meanwhile, and applying the form would silently undo their change.
var ErrPriceChanged = errors.New("a price changed since the form was shown")

// SetPrices stores new prices in one transaction, each only if it is still the price the admin saw, with
// who set it and an audit row per model (old → new). New tasks pay the new price from the commit on, on
// every instance; tasks already created keep the price they froze.
func SetPrices(ctx context.Context, d *db.DB, by audit.Actor, reason string, changes []PriceChange, now time.Time) error {
	reason, err := audit.CheckReason(reason)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		return invalid("No price was changed.")
	}
	now = now.UTC().Truncate(time.Microsecond)
	return d.Tx(ctx, func(tx *gorm.DB) error {
		for _, c := range changes {
			if _, err := ParsePrice(c.Model, c.New.String()); err != nil {
				return err
			}
			res := tx.Model(&models.Price{}).Where("model = ? AND micros_per_second = ?", c.Model, int64(c.Old)).
				Updates(map[string]any{"micros_per_second": int64(c.New), "updated_at": now, "updated_by": by.Name})
			if res.Error != nil {
				return fmt.Errorf("set the price of %s: %w", c.Model, res.Error)
			}
			if res.RowsAffected == 0 {
				return fmt.Errorf("%s: %w", c.Model, ErrPriceChanged)
			}
			if err := audit.Record(ctx, tx, now, by, audit.Entry{Action: audit.SetPrice, TargetType: audit.TargetPrice, TargetID: c.Model,
				Reason: reason, Detail: fmt.Sprintf("%s → %s per second", c.Old.USD(), c.New.USD())}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Invalidate is kept for callers written when the table was cached per instance (tests that edit the
// table directly): every read now sees the stored table, so there is nothing to drop.
func (p *Prices) Invalidate() {}
