package db

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// Queries counts the statements one piece of work (an HTTP request) sends to the database: every
// statement run through GORM or ReadRow with a context derived from it adds one. BEGIN and COMMIT are
// not counted. It is a context itself, so counting costs a request one allocation and no map.
type Queries struct {
	context.Context
	n atomic.Int64
}

type queriesKey struct{}

// CountQueries returns a context derived from parent whose statements are counted.
func CountQueries(parent context.Context) *Queries { return &Queries{Context: parent} }

// Value implements context.Context.
func (q *Queries) Value(key any) any {
	if key == (queriesKey{}) {
		return q
	}
	return q.Context.Value(key)
}

// N is how many statements have been counted so far.
func (q *Queries) N() int64 { return q.n.Load() }

// countQuery adds one statement to the counter of ctx, if it has one.
func countQuery(ctx context.Context) {
	if ctx == nil {
		return
	}
	if q, ok := ctx.Value(queriesKey{}).(*Queries); ok {
		q.n.Add(1)
	}
}

// countStatements registers the GORM callbacks that count the statements of g. Each runs after the
// statement was sent or failed; one GORM never built (a hook refused it) is not counted.
func countStatements(g *gorm.DB) error {
	count := func(tx *gorm.DB) {
		if tx.Statement.SQL.Len() > 0 && !tx.DryRun {
			countQuery(tx.Statement.Context)
		}
	}
	const name = "videogen:count_queries"
	cb := g.Callback()
	for _, err := range []error{
		cb.Query().After("gorm:query").Register(name, count),
		cb.Row().After("gorm:row").Register(name, count),
		cb.Raw().After("gorm:raw").Register(name, count),
		cb.Create().After("gorm:create").Register(name, count),
		cb.Update().After("gorm:update").Register(name, count),
		cb.Delete().After("gorm:delete").Register(name, count),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// ReadRow runs a query that returns at most one row on the reading pool and scans the row into dest,
// without GORM: for the hottest reads, whose reflection would cost more than the read. No row is
// sql.ErrNoRows. query is written with ? placeholders; on PostgreSQL give it through Placeholders first.
// A nullable column scans into a pointer to a pointer (nil for NULL). It is counted as GORM's
// statements are.
func (d *DB) ReadRow(ctx context.Context, query string, args []any, dest ...any) error {
	countQuery(ctx)
	if !d.Postgres {
		return d.rsql.QueryRowContext(ctx, query, args...).Scan(dest...)
	}
	// pgx itself, on a connection of the pool: database/sql's adapter sets up a converter for every
	// column of every query it reads — a third of an uncached poll's allocations.
	conn, err := d.rsql.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("postgres connection is a %T, not pgx's", dc)
		}
		return c.Conn().QueryRow(ctx, query, args...).Scan(dest...)
	})
}

// Placeholders returns query with its ? placeholders as the engine takes them (NumberPlaceholders on
// PostgreSQL; unchanged on SQLite). Call it once per query, not per execution.
func (d *DB) Placeholders(query string) string {
	if !d.Postgres {
		return query
	}
	return NumberPlaceholders(query)
}

// NumberPlaceholders returns query with its ? placeholders numbered as PostgreSQL takes them: $1, $2, …
// A ? inside a string literal is not told apart: such queries must take the value as a parameter.
func NumberPlaceholders(query string) string {
	out := make([]byte, 0, len(query)+8)
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] != '?' {
			out = append(out, query[i])
			continue
		}
		n++
		out = strconv.AppendInt(append(out, '$'), int64(n), 10)
	}
	return string(out)
}
