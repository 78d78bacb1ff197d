package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River's tables (the job queue, docs/jobs.md) are migrated by River's own migrations, with ours and
// before them: a migration of ours may move rows into them (pending outbox rows becoming jobs).

func (d *DB) riverMigrator() (*rivermigrate.Migrator[*sql.Tx], error) {
	cfg := &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)}
	var (
		m   *rivermigrate.Migrator[*sql.Tx]
		err error
	)
	if d.Postgres {
		m, err = rivermigrate.New(riverdatabasesql.New(d.WSQL()), cfg)
	} else {
		m, err = rivermigrate.New(riversqlite.New(d.WSQL()), cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("river migrations: %w", err)
	}
	return m, nil
}

// migrateRiver applies River's pending migrations and returns how many ran.
func (d *DB) migrateRiver(ctx context.Context) (int, error) {
	m, err := d.riverMigrator()
	if err != nil {
		return 0, err
	}
	res, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return 0, fmt.Errorf("apply river migrations: %w", err)
	}
	return len(res.Versions), nil
}

// riverPending reports whether River has a migration the database lacks.
func (d *DB) riverPending(ctx context.Context) (bool, error) {
	m, err := d.riverMigrator()
	if err != nil {
		return false, err
	}
	have, err := m.ExistingVersions(ctx)
	if err != nil {
		return false, fmt.Errorf("read river migration state: %w", err)
	}
	return len(have) < len(m.AllVersions()), nil
}

// RiverVersion is the newest River migration this binary applies; it names the test template with ours.
func RiverVersion() int {
	m, err := rivermigrate.New(riversqlite.New(nil), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0
	}
	all := m.AllVersions()
	return all[len(all)-1].Version
}
