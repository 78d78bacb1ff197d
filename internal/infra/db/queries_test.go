package db_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCountQueries: every statement run with a counting context adds one — GORM's reads, writes, raw
// statements and rows, in a transaction or not, and ReadRow's — and statements run with another
// context add nothing.
func TestCountQueries(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := testkit.OpenDB(t, url)
		ctx := context.Background()
		q := db.CountQueries(ctx)
		step := func(what string, want int64, run func() error) {
			t.Helper()
			before := q.N()
			if err := run(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if got := q.N() - before; got != want {
				t.Errorf("%s: counted %d statements, want %d", what, got, want)
			}
		}
		acct := models.Account{Name: "counted"}
		step("create", 1, func() error { return d.W.WithContext(q).Create(&acct).Error })
		step("take", 1, func() error { return d.R.WithContext(q).Take(&models.Account{}, acct.ID).Error })
		step("update", 1, func() error {
			return d.W.WithContext(q).Model(&acct).Update("name", "renamed").Error
		})
		step("raw scan", 1, func() error {
			var n int64
			return d.R.WithContext(q).Raw("SELECT count(*) FROM accounts").Scan(&n).Error
		})
		step("exec", 1, func() error {
			return d.W.WithContext(q).Exec("UPDATE accounts SET name = ? WHERE id = ?", "again", acct.ID).Error
		})
		step("a transaction of two statements", 2, func() error {
			return d.W.WithContext(q).Transaction(func(tx *gorm.DB) error {
				var a models.Account
				if err := tx.Take(&a, acct.ID).Error; err != nil {
					return err
				}
				return tx.Model(&a).Update("name", "in a transaction").Error
			})
		})
		step("ReadRow", 1, func() error {
			var name string
			var disabled *time.Time
			if err := d.ReadRow(q, d.Placeholders("SELECT name, disabled_at FROM accounts WHERE id = ?"), []any{acct.ID}, &name, &disabled); err != nil {
				return err
			}
			if name != "in a transaction" || disabled != nil {
				t.Errorf("ReadRow read %q, %v", name, disabled)
			}
			return nil
		})
		step("ReadRow of no row", 1, func() error {
			var name string
			if err := d.ReadRow(q, d.Placeholders("SELECT name FROM accounts WHERE id = ?"), []any{-1}, &name); !errors.Is(err, sql.ErrNoRows) {
				t.Errorf("ReadRow of no row: %v, want sql.ErrNoRows", err)
			}
			return nil
		})
		step("another context", 0, func() error { return d.R.WithContext(ctx).Take(&models.Account{}, acct.ID).Error })
		step("a context derived from the counting one", 1, func() error {
			child, cancel := context.WithCancel(q)
			defer cancel()
			return d.R.WithContext(child).Take(&models.Account{}, acct.ID).Error
		})
	})
}

// TestPlaceholders: ? placeholders are numbered on PostgreSQL and left as they are on SQLite.
func TestPlaceholders(t *testing.T) {
	pg, lite := &db.DB{Postgres: true}, &db.DB{}
	const q = "SELECT a FROM t WHERE id = ? AND b = ? AND c IN (?, ?, ?, ?, ?, ?, ?, ?, ?)"
	if got, want := pg.Placeholders(q), "SELECT a FROM t WHERE id = $1 AND b = $2 AND c IN ($3, $4, $5, $6, $7, $8, $9, $10, $11)"; got != want {
		t.Errorf("postgres: %s\nwant %s", got, want)
	}
	if got := lite.Placeholders(q); got != q {
		t.Errorf("sqlite: %s", got)
	}
}
