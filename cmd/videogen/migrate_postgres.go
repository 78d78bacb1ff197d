package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
)

func migrateToPostgresCmd() *cobra.Command {
	var to string
	c := &cobra.Command{
		Use:   "migrate-to-postgres --to postgres://…",
		Short: "copy this SQLite installation, every table of it, into an empty PostgreSQL database (docs/backups.md)",
		Long: `Migrate-to-postgres copies the SQLite installation DATABASE_URL (or DATA_DIR) names into the
PostgreSQL database --to names, which it migrates first and which must hold no rows:

  - every table of the schema, read from the database itself, parents before the tables that refer
    to them, in one read transaction of the source and one write transaction of the target (a failed
    copy leaves the target empty: run it again);
  - the ids as they are, then every sequence moved past the highest id;
  - the jobs not finished yet (e-mails, webhook deliveries, payments' work) queued again in PostgreSQL,
    each as it was; River's other tables describe the instances that ran, and start empty;
  - then each table's row count compared, and the ledger audited as videogen audit does.

Stop the server first (the command refuses while the SQLite file is open elsewhere): rows written after
the copy would not be in PostgreSQL. Stored files are not moved: the rows name them by key, and they stay
under DATA_DIR (or in S3). Several replicas need S3: docs/backups.md says how to upload them.
Exit status 0: copied and the books agree; 1: refused, failed, or the audit found problems.`,
		Example: "  videogen migrate-to-postgres --to postgres://videogen@db.internal:5432/videogen",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(nil)
			if err != nil {
				return err
			}
			return migrateToPostgres(cmd.Context(), cfg, to, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&to, "to", "", "the PostgreSQL database's URL (required; it must be empty)")
	_ = c.MarkFlagRequired("to")
	return c
}

// tableCopy is one table as both sides have it: the target's columns in order, with their types.
type tableCopy struct {
	name    string
	columns []string
	types   []string // PostgreSQL's data_type of each column
	orderBy string   // the source's primary key, so ids go in ascending
}

func migrateToPostgres(ctx context.Context, cfg *config.Config, to string, w io.Writer) error {
	start := time.Now()
	if cfg.IsPostgres() {
		return errors.New("DATABASE_URL already names PostgreSQL: migrate-to-postgres copies a SQLite installation")
	}
	if !strings.HasPrefix(to, "postgres://") && !strings.HasPrefix(to, "postgresql://") {
		return errors.New("--to must be a postgres:// URL")
	}
	shown := "the --to database"
	if u, err := url.Parse(to); err == nil {
		shown = u.Redacted()
	}
	srcPath := db.SQLitePath(cfg.DatabaseURL)
	if _, err := os.Stat(srcPath); err != nil {
		return fmt.Errorf("no SQLite database at %s: %w", srcPath, err)
	}
	if busy, err := sqliteInUse(srcPath); err != nil {
		return err
	} else if busy {
		return fmt.Errorf("%s is open in another process: stop videogen serve first (rows written after the copy would not be in PostgreSQL)", srcPath)
	}

	src, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer src.Close()
	// Both sides at this binary's schema, so they have the same tables and columns.
	if _, err := src.Migrate(ctx); err != nil {
		return fmt.Errorf("the SQLite database: %w", err)
	}
	dst, err := db.Open(ctx, to)
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer dst.Close()
	if _, err := dst.Migrate(ctx); err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	srcSQL, err := src.R.DB()
	if err != nil {
		return err
	}
	dstSQL := dst.WSQL()

	// One read transaction: every table is copied as of the same instant.
	stx, err := srcSQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", srcPath, err)
	}
	defer func() { _ = stx.Rollback() }()
	plan, err := planCopy(ctx, stx, dstSQL)
	if err != nil {
		return err
	}
	names := make([]string, len(plan))
	for i, t := range plan {
		names[i] = t.name
	}
	before, err := countRows(ctx, dstSQL, names)
	if err != nil {
		return err
	}
	for _, t := range names {
		if before[t] > 0 {
			return fmt.Errorf("%s is not empty (%s has %d rows): migrate into a new database (createdb)", shown, t, before[t])
		}
	}

	ttx, err := dstSQL.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer func() { _ = ttx.Rollback() }()
	for _, t := range plan {
		if err := copyTable(ctx, stx, ttx, t); err != nil {
			return err
		}
	}
	jobs, err := copyJobs(ctx, stx, dstSQL, ttx)
	if err != nil {
		return err
	}
	if err := resetSequences(ctx, ttx); err != nil {
		return err
	}
	if err := ttx.Commit(); err != nil {
		return fmt.Errorf("commit the copy into %s: %w", shown, err)
	}

	srcCounts, err := countRows(ctx, stx, names)
	if err != nil {
		return err
	}
	dstCounts, err := countRows(ctx, dstSQL, names)
	if err != nil {
		return err
	}
	_ = stx.Rollback()
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\tSQLite\tPostgreSQL\t")
	var differ []string
	for _, t := range slices.Sorted(slices.Values(names)) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", t, srcCounts[t], dstCounts[t])
		if srcCounts[t] != dstCounts[t] {
			differ = append(differ, t)
		}
	}
	_ = tw.Flush()
	if len(differ) > 0 {
		return fmt.Errorf("row counts differ in %s", strings.Join(differ, ", "))
	}
	fmt.Fprintf(w, "copied %d tables from %s to %s in %.1fs\n", len(names), srcPath, shown, time.Since(start).Seconds())
	fmt.Fprintf(w, "queued %d unfinished jobs (e-mails, webhook deliveries, payments' work) in PostgreSQL\n", jobs)

	problems, err := tasks.Audit(ctx, dst)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintln(w, p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("copied, but the audit of %s found %d problems", shown, len(problems))
	}
	fmt.Fprintln(w, "ledger and task counters agree")
	printNextSteps(w, cfg, shown)
	return nil
}

// planCopy lists the tables to copy, parents first, with the target's columns, after checking that both
// sides have the same tables and columns (they do when both are at this binary's schema; a difference
// means one of them is not videogen's).
func planCopy(ctx context.Context, src *sql.Tx, dst *sql.DB) ([]tableCopy, error) {
	srcTables, err := listTables(ctx, src, false)
	if err != nil {
		return nil, err
	}
	dstTables, err := listTables(ctx, dst, true)
	if err != nil {
		return nil, err
	}
	skip := func(t string) bool { return t == gooseTable || isRiverTable(t) }
	srcTables = slices.DeleteFunc(srcTables, skip)
	dstTables = slices.DeleteFunc(dstTables, skip)
	if !slices.Equal(srcTables, dstTables) {
		return nil, fmt.Errorf("the two schemas differ: SQLite has tables %v, PostgreSQL %v", srcTables, dstTables)
	}
	order, err := parentsFirst(ctx, dst, dstTables)
	if err != nil {
		return nil, err
	}
	plan := make([]tableCopy, 0, len(order))
	for _, name := range order {
		t := tableCopy{name: name}
		rows, err := dst.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, name)
		if err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", name, err)
		}
		for rows.Next() {
			var col, typ string
			if err := rows.Scan(&col, &typ); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read the columns of %s: %w", name, err)
			}
			t.columns, t.types = append(t.columns, col), append(t.types, typ)
		}
		rows.Close()
		srcCols, pk, err := sqliteColumns(ctx, src, name)
		if err != nil {
			return nil, err
		}
		if a, b := slices.Sorted(slices.Values(srcCols)), slices.Sorted(slices.Values(t.columns)); !slices.Equal(a, b) {
			return nil, fmt.Errorf("the two schemas differ in %s: SQLite has columns %v, PostgreSQL %v", name, a, b)
		}
		t.orderBy = "rowid"
		if len(pk) > 0 {
			quoted := make([]string, len(pk))
			for i, c := range pk {
				quoted[i] = quoteIdent(c)
			}
			t.orderBy = strings.Join(quoted, ", ")
		}
		plan = append(plan, t)
	}
	return plan, nil
}

// sqliteColumns names a SQLite table's columns and its primary key's, in key order.
func sqliteColumns(ctx context.Context, src *sql.Tx, table string) (cols, pk []string, err error) {
	rows, err := src.QueryContext(ctx, "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", table)
	if err != nil {
		return nil, nil, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	defer rows.Close()
	keyed := map[int]string{}
	for rows.Next() {
		var name string
		var n int
		if err := rows.Scan(&name, &n); err != nil {
			return nil, nil, fmt.Errorf("read the columns of %s: %w", table, err)
		}
		cols = append(cols, name)
		if n > 0 {
			keyed[n] = name
		}
	}
	for i := 1; i <= len(keyed); i++ {
		pk = append(pk, keyed[i])
	}
	return cols, pk, rows.Err()
}

// parentsFirst orders tables so that each comes after every table its foreign keys refer to, as
// PostgreSQL's catalogue says (ties by name, so the order is the same every run).
func parentsFirst(ctx context.Context, dst *sql.DB, tables []string) ([]string, error) {
	rows, err := dst.QueryContext(ctx, `SELECT child.relname, parent.relname FROM pg_constraint c
		JOIN pg_class child ON child.oid = c.conrelid
		JOIN pg_class parent ON parent.oid = c.confrelid
		JOIN pg_namespace n ON n.oid = child.relnamespace
		WHERE c.contype = 'f' AND n.nspname = current_schema()`)
	if err != nil {
		return nil, fmt.Errorf("read the foreign keys: %w", err)
	}
	defer rows.Close()
	parents := map[string]map[string]bool{}
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			return nil, fmt.Errorf("read the foreign keys: %w", err)
		}
		if child == parent {
			continue // a row referring to its own table: ascending ids put the referred row first
		}
		if parents[child] == nil {
			parents[child] = map[string]bool{}
		}
		parents[child][parent] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the foreign keys: %w", err)
	}
	var order []string
	done := map[string]bool{}
	for len(order) < len(tables) {
		progress := false
		for _, t := range tables { // sorted by name
			if done[t] {
				continue
			}
			ready := true
			for p := range parents[t] {
				if !done[p] {
					ready = false
					break
				}
			}
			if ready {
				order, done[t], progress = append(order, t), true, true
			}
		}
		if !progress {
			return nil, fmt.Errorf("the foreign keys of the tables left (%v) form a cycle", slices.DeleteFunc(slices.Clone(tables), func(t string) bool { return done[t] }))
		}
	}
	return order, nil
}

// maxParams is below PostgreSQL's limit of 65,535 parameters in one statement.
const maxParams = 60000

// copyTable copies one table in multi-row INSERTs of up to 500 rows, streaming: one batch in memory.
func copyTable(ctx context.Context, src *sql.Tx, dst *sql.Tx, t tableCopy) error {
	quoted := make([]string, len(t.columns))
	for i, c := range t.columns {
		quoted[i] = quoteIdent(c)
	}
	cols := strings.Join(quoted, ", ")
	rows, err := src.QueryContext(ctx, "SELECT "+cols+" FROM "+quoteIdent(t.name)+" ORDER BY "+t.orderBy)
	if err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	defer rows.Close()
	perBatch := min(500, maxParams/len(t.columns))
	batch := make([]any, 0, perBatch*len(t.columns))
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		var sb strings.Builder
		sb.WriteString("INSERT INTO " + quoteIdent(t.name) + " (" + cols + ") VALUES ")
		for r := 0; r < len(batch)/len(t.columns); r++ {
			if r > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('(')
			for c := range t.columns {
				if c > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString("$" + strconv.Itoa(r*len(t.columns)+c+1))
			}
			sb.WriteByte(')')
		}
		if _, err := dst.ExecContext(ctx, sb.String(), batch...); err != nil {
			return fmt.Errorf("write %s: %w", t.name, err)
		}
		batch = batch[:0]
		return nil
	}
	vals := make([]any, len(t.columns))
	ptrs := make([]any, len(t.columns))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("read %s: %w", t.name, err)
		}
		for i, v := range vals {
			pv, err := toPostgres(v, t.types[i])
			if err != nil {
				return fmt.Errorf("%s.%s: %w", t.name, t.columns[i], err)
			}
			batch = append(batch, pv)
		}
		if len(batch) == perBatch*len(t.columns) {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s: %w", t.name, err)
	}
	return flush()
}

// sqliteTimeLayouts are the ways a time may be stored as text in SQLite: the driver's own (read back
// as time.Time already) and SQLite's date functions'.
var sqliteTimeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02 15:04:05.999999999-07:00",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04",
	"2006-01-02",
}

// toPostgres turns a value as SQLite's driver reads it into one of the PostgreSQL column's type: SQLite
// keeps booleans as integers and times as text; a type this does not know fails the copy, naming the
// column, rather than guessing.
func toPostgres(v any, pgType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch pgType {
	case "timestamp with time zone", "timestamp without time zone", "date":
		switch x := v.(type) {
		case time.Time:
			// PostgreSQL keeps microseconds; truncating here (not rounding there) matches db.Now.
			return x.UTC().Truncate(time.Microsecond), nil
		case string:
			return parseSQLiteTime(x)
		case []byte:
			return parseSQLiteTime(string(x))
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
			return x, nil
		case int64:
			return x != 0, nil
		case string:
			return strconv.ParseBool(x)
		}
	case "bigint", "integer", "smallint":
		switch x := v.(type) {
		case int64:
			return x, nil
		case bool:
			if x {
				return int64(1), nil
			}
			return int64(0), nil
		case float64:
			if x == math.Trunc(x) {
				return int64(x), nil
			}
		case string:
			return strconv.ParseInt(x, 10, 64)
		}
	case "double precision", "real", "numeric":
		switch x := v.(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case string:
			return strconv.ParseFloat(x, 64)
		}
	case "bytea":
		switch x := v.(type) {
		case []byte:
			if x == nil {
				return []byte{}, nil // SQLite's driver reads an empty BLOB as a nil slice, which pgx would write as NULL
			}
			return x, nil
		case string:
			return []byte(x), nil
		}
	case "text", "character varying":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		case int64:
			return strconv.FormatInt(x, 10), nil
		case float64:
			return strconv.FormatFloat(x, 'g', -1, 64), nil
		}
	default:
		return nil, fmt.Errorf("column type %s: the copy does not know it yet (add it to toPostgres)", pgType)
	}
	return nil, fmt.Errorf("a %T (%v) does not fit a %s column", v, v, pgType)
}

func parseSQLiteTime(s string) (time.Time, error) {
	for _, layout := range sqliteTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Truncate(time.Microsecond), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time", s)
}

// resetSequences moves every serial column's sequence past the highest id copied, so the next row the
// application inserts gets a fresh id.
func resetSequences(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_default LIKE 'nextval(%' ORDER BY table_name, column_name`)
	if err != nil {
		return fmt.Errorf("list the sequences: %w", err)
	}
	type serial struct{ table, column string }
	var serials []serial
	for rows.Next() {
		var s serial
		if err := rows.Scan(&s.table, &s.column); err != nil {
			rows.Close()
			return fmt.Errorf("list the sequences: %w", err)
		}
		serials = append(serials, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list the sequences: %w", err)
	}
	for _, s := range serials {
		q := fmt.Sprintf("SELECT setval(pg_get_serial_sequence($1, $2), COALESCE((SELECT MAX(%s) FROM %s), 0) + 1, false)",
			quoteIdent(s.column), quoteIdent(s.table))
		if _, err := tx.ExecContext(ctx, q, quoteIdent(s.table), s.column); err != nil {
			return fmt.Errorf("reset the sequence of %s.%s: %w", s.table, s.column, err)
		}
	}
	return nil
}

// printNextSteps says what the PostgreSQL installation needs besides its database.
func printNextSteps(w io.Writer, cfg *config.Config, shown string) {
	fmt.Fprintf(w, "\nNext: run %s with DATABASE_URL=%s and\n", invoked(), shown)
	dataDir, _ := filepath.Abs(cfg.DataDir)
	if cfg.AppSecret == "" {
		fmt.Fprintf(w, "  - the same secret: APP_SECRET set to the contents of %s (or the same DATA_DIR);\n", filepath.Join(dataDir, secretName))
	} else {
		fmt.Fprintln(w, "  - the same APP_SECRET;")
	}
	if cfg.S3Endpoint != "" {
		fmt.Fprintf(w, "  - the same S3 settings: the stored files are in bucket %s already.\n", cfg.S3Bucket)
		return
	}
	fmt.Fprintf(w, "  - the stored files: they stay in %s (blobs/, media/); one server keeps DATA_DIR=%s, several need\n"+
		"    S3 and the files uploaded there first (docs/backups.md, \"Moving to PostgreSQL\").\n", dataDir, dataDir)
}
