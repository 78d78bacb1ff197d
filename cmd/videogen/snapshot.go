package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"videogen/internal/domain/tasks"
	"videogen/migrations"
	"videogen/models"
)

// querier is what the snapshot readers need of a connection: a *sql.DB, a *sql.Conn or a *sql.Tx (the
// PostgreSQL backup reads inside the transaction whose snapshot pg_dump copies).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// gooseTable is goose's own bookkeeping: counted in a manifest, never copied by migrate-to-postgres
// (the target's migrations write their own).
const gooseTable = "goose_db_version"

// listTables names every table of the schema, sorted: read from the database itself, so a table a new
// migration adds is backed up, counted and copied without anyone updating a list.
func listTables(ctx context.Context, q querier, postgres bool) ([]string, error) {
	query := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`
	if postgres {
		query = `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		names = append(names, n)
	}
	// Sorted here, not by the engine: PostgreSQL's collation may order underscores differently.
	sort.Strings(names)
	return names, rows.Err()
}

// countRows counts every table's rows.
func countRows(ctx context.Context, q querier, tables []string) (map[string]int64, error) {
	counts := make(map[string]int64, len(tables))
	for _, t := range tables {
		var n int64
		if err := q.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(t)).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		counts[t] = n
	}
	return counts, nil
}

// schemaVersion is the newest migration applied, as goose records it (the same SQL on both engines).
func schemaVersion(ctx context.Context, q querier) (int64, error) {
	var v int64
	if err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version_id), 0) FROM "+gooseTable+" WHERE is_applied").Scan(&v); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	return v, nil
}

// latestSchemaVersion is the newest migration this binary carries for the engine.
func latestSchemaVersion(postgres bool) (int64, error) {
	dir := "sqlite"
	if postgres {
		dir = "postgres"
	}
	entries, err := fs.ReadDir(migrations.FS, dir)
	if err != nil {
		return 0, fmt.Errorf("read the embedded migrations: %w", err)
	}
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}

// Where a stored file lives, relative to DATA_DIR and to a backup's folder alike: outputs under
// blobs/ (the outputs store is rooted at DATA_DIR/blobs), media under DATA_DIR itself (their keys start
// with media/), as internal/server's stores lay them out.
const outputsDir = "blobs"

// storedFile is a file a snapshot's rows name.
type storedFile struct {
	Path string // relative to DATA_DIR, slash-separated
	Why  string // what names it: "output of video_…" or "media file_…"
}

// namedFiles lists the files the snapshot's rows name: each task's video and stills (the keys
// tasks.StoredKeys knows, as the janitor reads them) and every uploaded or imported file that is ready
// and not being deleted. A file no row names is not wanted by a restore: the storage sweep would delete
// it; nor is a pending upload's, which may be half written and which the janitor deletes with its row.
func namedFiles(ctx context.Context, q querier) ([]storedFile, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, output_key, thumbnail_key, spritesheet_key, last_frame_key
		FROM tasks WHERE output_key IS NOT NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read output keys: %w", err)
	}
	var files []storedFile
	for rows.Next() {
		var t models.Task
		if err := rows.Scan(&t.ID, &t.OutputKey, &t.ThumbnailKey, &t.SpritesheetKey, &t.LastFrameKey); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read output keys: %w", err)
		}
		for _, k := range tasks.StoredKeys(&t) {
			files = append(files, storedFile{Path: outputsDir + "/" + k, Why: "output of " + t.ID})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read output keys: %w", err)
	}
	rows, err = q.QueryContext(ctx, `SELECT id, storage_key FROM media WHERE state = 'ready' AND deleted_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read media keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, key string
		if err := rows.Scan(&id, &key); err != nil {
			return nil, fmt.Errorf("read media keys: %w", err)
		}
		files = append(files, storedFile{Path: key, Why: "media " + id})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read media keys: %w", err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// quoteIdent quotes a table or column name read from the schema, for both engines.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
