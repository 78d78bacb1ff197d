package db

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// janitorRun is one named piece of housekeeping that one instance at a time should do.
type janitorRun struct {
	Name      string `gorm:"primaryKey"`
	StartedAt time.Time
	Owner     string
}

func (janitorRun) TableName() string { return "janitor_runs" }

// ClaimRun reports whether this instance (owner) runs the job called name now: it does when no instance
// started it in the last interval, and the claim is the one UPDATE that moves the shared row's start
// time past the interval — so of several instances asking at once, exactly one gets true.
func (d *DB) ClaimRun(ctx context.Context, name, owner string, every time.Duration, now time.Time) (bool, error) {
	if err := d.W.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&janitorRun{Name: name, StartedAt: time.Unix(0, 0).UTC()}).Error; err != nil {
		return false, fmt.Errorf("prepare run %s: %w", name, err)
	}
	res := d.W.WithContext(ctx).Exec("UPDATE janitor_runs SET started_at = ?, owner = ? WHERE name = ? AND started_at <= ?",
		now, owner, name, now.Add(-every))
	if res.Error != nil {
		return false, fmt.Errorf("claim run %s: %w", name, res.Error)
	}
	return res.RowsAffected == 1, nil
}
