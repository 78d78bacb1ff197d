package main_test

import (
	"bytes"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestMigrateToPostgresRefuses: the command copies a SQLite installation into a postgres:// URL and
// nothing else, and says so (no PostgreSQL needed).
func TestMigrateToPostgresRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, stderr, code := run(t, dir, installation(t, dir, ""), "migrate-to-postgres", "--to", "/tmp/other.db"); code != 1 || !strings.Contains(stderr, "postgres://") {
		t.Fatalf("--to a file: exit %d %q", code, stderr)
	}
	env := installation(t, dir, "postgres://nobody@127.0.0.1:1/none")
	if _, stderr, code := run(t, dir, env, "migrate-to-postgres", "--to", "postgres://nobody@127.0.0.1:1/other"); code != 1 || !strings.Contains(stderr, "already names PostgreSQL") {
		t.Fatalf("from PostgreSQL: exit %d %q", code, stderr)
	}
}

// TestMigrateToPostgres: a SQLite installation with a row in every table of the schema — accounts and
// keys, the ledger, completed and failed tasks, media, the call log, sessions, e-mails, payments, staff
// records — is copied into a fresh PostgreSQL database. Every table arrives whole (each row compared
// value by value: a table the copy missed, or a column it mangled, fails here), the audit is clean, and
// a server on PostgreSQL with the same DATA_DIR authenticates the key, serves the completed video and
// the uploaded file, and writes new rows past the copied ids. A second copy into the same database is
// refused.
func TestMigrateToPostgres(t *testing.T) {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		t.Skip("needs PostgreSQL (TEST_DATABASE_URL); TestMigrateToPostgresRefuses runs without it")
	}
	t.Parallel()
	dir := t.TempDir()
	env := installation(t, dir, "")
	// Quick background jobs, so the server itself fills their tables.
	env["UPSTREAMS_WATCH_INTERVAL"] = "100ms"
	d := openInstallation(t, dir, env)
	a := testkit.NewAccount(t, d, "100")
	_ = d.Close()
	p := serve(t, dir, env)
	src := &testkit.Server{URL: p.url}
	style := testkit.PNG(t, 48, 48)
	up := src.Upload(t, a.Key, "", testkit.File("image_files", "style.png", style))
	if up.Status != 200 {
		t.Fatalf("upload: %d %s", up.Status, up.Body)
	}
	styleURL := up.Answer(t).ImageURLs[0]
	done := src.CreateVideo(t, a.Key, map[string]any{"model": backupModel, "prompt": "a kite", "image_urls": []string{styleURL}},
		"Idempotency-Key", "kite-1")["id"].(string)
	failed := src.CreateVideo(t, a.Key, map[string]any{"model": backupModel, "prompt": "[sim:fail] a kite"})["id"].(string)
	src.WaitStatus(t, a.Key, done, 30*time.Second, "completed")
	src.WaitStatus(t, a.Key, failed, 30*time.Second, "failed")
	video := src.Do(t, "GET", "/v1/videos/"+done+"/content", a.Key, nil)
	if video.Status != 200 {
		t.Fatalf("download on SQLite: %d", video.Status)
	}
	for _, args := range [][]string{
		{"wallet", "credit", "--email", a.Email, "--usd", "5", "--reason", "before the move"}, // audit_log
		{"accounts", "create", "--email", "later@example.com"},                                // email_tokens (its set-password link)
		{"ledger", "check"}, // ledger_checks
	} {
		if out, stderr, code := run(t, dir, env, args...); code != 0 {
			t.Fatalf("%v: exit %d %s%s", args, code, out, stderr)
		}
	}
	testkit.Eventually(t, 10*time.Second, "the server records its upstream health", func() bool {
		d := openInstallation(t, dir, env)
		defer d.Close()
		return count(t, d, "upstream_health") > 0
	})

	// The refusal while the server has the file open.
	to := freshDatabase(t)
	if _, stderr, code := run(t, dir, env, "migrate-to-postgres", "--to", to); code != 1 || !strings.Contains(stderr, "open in another process") {
		t.Fatalf("migrate-to-postgres beside a running server: exit %d %q", code, stderr)
	}
	stopServer(t, p)

	// What the product writes only through Stripe, the console or a reset request, written here: every
	// table must hold a row, or its copy is not checked.
	d = openInstallation(t, dir, env)
	now := time.Now().UTC()
	var userID int64
	if err := d.R.Raw("SELECT id FROM users WHERE email = ?", a.Email).Scan(&userID).Error; err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{"INSERT INTO sessions (user_id, token_hash, created_at, last_seen_at, expires_at, ip, user_agent) VALUES (?, ?, ?, ?, ?, ?, ?)",
			[]any{userID, "session-hash", now, now, now.Add(time.Hour), "127.0.0.1", "test"}},
		{"INSERT INTO recovery_codes (user_id, code_hash, created_at) VALUES (?, ?, ?)", []any{userID, "code-hash", now}},
		{"UPDATE users SET totp_sealed = ?, totp_enabled_at = ?, totp_last_step = ? WHERE id = ?", []any{[]byte{0, 1, 2, 0xff}, now, 12345, userID}},
		{"INSERT INTO mail_outbox (kind, recipient, subject, sealed_body, idempotency_key, created_at) VALUES (?, ?, ?, ?, ?, ?)",
			[]any{"receipt", a.Email, "Your receipt", []byte{9, 8, 7, 0}, "mail-1", now}},
		{"INSERT INTO billing_profiles (account_id, stripe_customer_id, recharge_enabled, low_balance_armed, updated_at) VALUES (?, ?, ?, ?, ?)",
			[]any{a.ID, "cus_123", true, false, now}},
		{"INSERT INTO topups (id, account_id, user_id, source, state, amount_micros, save_card, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			[]any{"topup_1", a.ID, userID, "checkout", "pending", 25_000_000, true, now, now}},
		{"INSERT INTO stripe_events (id, type, payload, state, stripe_created, received_at) VALUES (?, ?, ?, ?, ?, ?)",
			[]any{"evt_1", "checkout.session.expired", `{"id":"evt_1"}`, "ignored", now.Add(-time.Minute), now}},
		{"INSERT INTO control_signals (name, seq, updated_at) VALUES (?, ?, ?)", []any{"upstreams_reload", 3, now}},
		{"INSERT INTO upstream_reload_acks (instance, seq, error, at) VALUES (?, ?, ?, ?)", []any{"gone-1", 3, "", now}},
		// Only the Stripe reconciliation still claims its turns here (the other chores are River's periodic jobs).
		{"INSERT INTO stripe_reconcile_runs (at, owner, since, sessions, payment_intents, differences, applied, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
			[]any{now, "gone-1", now.Add(-72 * time.Hour), 4, 1, 1, 0, "cs_1 paid but not credited"}},
		{"UPDATE tasks SET rendered_seconds = ?, rendered_fps = ? WHERE id = ?", []any{4.04, 24, done}},
		{"UPDATE accounts SET billing_name = ?, billing_address = ?, billing_tax_id = ? WHERE id = ?", []any{"Kite Films GmbH", "Gartenstraße 5\n10115 Berlin", "DE123456789", a.ID}},
		// The key's limits (the create after the move is held to them on PostgreSQL).
		{"UPDATE api_keys SET spend_limit_micros = ?, limit_period = ?, allowed_models = ? WHERE account_id = ?",
			[]any{50_000_000, "month", backupModel + ",videogen-2.0-720p", a.ID}},
		{"INSERT INTO webhook_endpoints (id, account_id, url, events, secret_sealed, secret_hint, previous_secret_sealed, previous_until, enabled, failing_since, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			[]any{"we_1", a.ID, "https://hooks.example.com/in", "video.completed,video.failed", []byte{1, 2, 0, 0xfe}, "whsec_…abcd", []byte{3, 0, 4}, now.Add(time.Hour), true, now, now, now}},
		{"INSERT INTO webhook_events (id, account_id, type, subject_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)",
			[]any{"evt_w1", a.ID, "video.completed", done, `{"id":"evt_w1","object":"event"}`, now}},
		{"INSERT INTO webhook_deliveries (event_id, endpoint_id, attempts, created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?)",
			[]any{"evt_w1", "we_1", 1, now, now.Add(time.Minute)}},
		{"INSERT INTO invitations (account_id, email, role, token_hash, invited_by, created_at, expires_at, accepted_at, accepted_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			[]any{a.ID, "later@example.com", "developer", "invitation-hash", userID, now, now.Add(7 * 24 * time.Hour), now, userID}},
		{"UPDATE users SET account_role = ?, removed_at = ? WHERE email = ?", []any{"billing", now, "later@example.com"}},
		{"INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, at, status, latency_ms, response, error) VALUES ((SELECT MAX(id) FROM webhook_deliveries), ?, ?, ?, ?, ?, ?, ?)",
			[]any{"we_1", 1, now, 500, 42, "oops", ""}},
	} {
		if err := d.W.Exec(stmt.sql, stmt.args...).Error; err != nil {
			t.Fatalf("%s: %v", stmt.sql, err)
		}
	}
	// A job not done yet (a webhook delivery's retry, due tomorrow): it is queued again in PostgreSQL,
	// River's own tables are not copied row by row.
	due := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Millisecond)
	if err := d.W.Exec(`INSERT INTO river_job (args, kind, queue, priority, max_attempts, attempt, state, scheduled_at)
		VALUES (jsonb('{"delivery_id":1,"before":1}'), 'webhook_delivery', 'webhooks', 1, 10, 1, 'retryable', ?)`, due.Format("2006-01-02 15:04:05.000")).Error; err != nil {
		t.Fatal(err)
	}
	var tables []string
	if err := d.R.Raw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' AND name <> 'goose_db_version' AND name NOT LIKE 'river%' ORDER BY name").Scan(&tables).Error; err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		if count(t, d, table) == 0 {
			t.Errorf("the fixture has no row in %s: give it one here, so that its copy is checked", table)
		}
	}
	_ = d.Close()
	if t.Failed() {
		t.FailNow()
	}

	started := time.Now()
	out, stderr, code := run(t, dir, env, "migrate-to-postgres", "--to", to)
	t.Logf("migrate-to-postgres of %d tables: %s", len(tables), time.Since(started).Round(time.Millisecond))
	if code != 0 || !strings.Contains(out, "ledger and task counters agree") {
		t.Fatalf("migrate-to-postgres: exit %d\n%s%s", code, out, stderr)
	}
	sqliteDB, err := sql.Open("sqlite", "file:"+databaseOf(dir, env)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sqliteDB.Close()
	pgDB, err := sql.Open("pgx", to)
	if err != nil {
		t.Fatal(err)
	}
	defer pgDB.Close()
	for _, table := range tables {
		cols := pgColumns(t, pgDB, table)
		want, got := tableContent(t, sqliteDB, table, cols), tableContent(t, pgDB, table, cols)
		if !slices.Equal(want, got) {
			t.Errorf("%s differs after the copy:\nSQLite     %v\nPostgreSQL %v", table, want, got)
		}
	}
	var job struct {
		Args        string
		MaxAttempts int
		At          time.Time
	}
	if err := pgDB.QueryRow(`SELECT args::text, max_attempts, scheduled_at FROM river_job WHERE kind = 'webhook_delivery' AND state = 'scheduled'`).
		Scan(&job.Args, &job.MaxAttempts, &job.At); err != nil || !strings.Contains(job.Args, `"delivery_id": 1`) || job.MaxAttempts != 9 || !job.At.Equal(due) {
		t.Errorf("the unfinished job in PostgreSQL: %+v, %v; want delivery 1's, 9 attempts left, due %s", job, err, due)
	}
	// Closed now: an open connection, even this read-only one, makes the command refuse the file.
	_ = sqliteDB.Close()
	pgEnv := installation(t, dir, to)
	if out, stderr, code := run(t, dir, pgEnv, "audit"); code != 0 {
		t.Fatalf("audit on PostgreSQL: exit %d\n%s%s", code, out, stderr)
	}

	// The installation runs on PostgreSQL, with the files where they were.
	p = serve(t, dir, pgEnv)
	dst := &testkit.Server{URL: p.url}
	if r := dst.Do(t, "GET", "/v1/videos", a.Key, nil); r.Status != 200 || !strings.Contains(string(r.Body), done) {
		t.Fatalf("the key on PostgreSQL: %d %s", r.Status, r.Body)
	}
	if r := dst.Do(t, "GET", "/v1/videos/"+done+"/content", a.Key, nil); r.Status != 200 || !bytes.Equal(r.Body, video.Body) {
		t.Fatalf("the completed video on PostgreSQL: %d, %d bytes (want %d)", r.Status, len(r.Body), len(video.Body))
	}
	u, _ := url.Parse(styleURL)
	if r := dst.Do(t, "GET", u.RequestURI(), "", nil); r.Status != 200 || !bytes.Equal(r.Body, style) {
		t.Fatalf("the uploaded file on PostgreSQL: %d", r.Status)
	}
	// New rows get ids past the copied ones: tasks' events, ledger entries, call-log rows, users.
	next := dst.CreateVideo(t, a.Key, map[string]any{"model": backupModel, "prompt": "after the move"})["id"].(string)
	dst.WaitStatus(t, a.Key, next, 30*time.Second, "completed")
	if out, stderr, code := run(t, dir, pgEnv, "accounts", "create", "--email", "after@example.com"); code != 0 {
		t.Fatalf("accounts create on PostgreSQL: exit %d %s%s", code, out, stderr)
	}

	if _, stderr, code := run(t, dir, env, "migrate-to-postgres", "--to", to); code != 1 || !strings.Contains(stderr, "not empty") {
		t.Fatalf("a second copy into the same database: exit %d %q", code, stderr)
	}
}

// pgColumns lists a PostgreSQL table's columns in order.
func pgColumns(t *testing.T, pg *sql.DB, table string) []string {
	t.Helper()
	rows, err := pg.Query(`SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		t.Fatalf("PostgreSQL has no table %s", table)
	}
	return cols
}

// tableContent reads every row of a table as text, the same for both engines (a boolean as 0 or 1, a
// time in UTC to the microsecond, bytes in hex), sorted: the engines order text differently.
func tableContent(t *testing.T, q *sql.DB, table string, cols []string) []string {
	t.Helper()
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + c + `"`
	}
	rows, err := q.Query("SELECT " + strings.Join(quoted, ", ") + ` FROM "` + table + `"`)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		fields := make([]string, len(cols))
		for i, v := range vals {
			fields[i] = cols[i] + "=" + asText(v)
		}
		out = append(out, strings.Join(fields, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func asText(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case int64:
		return strconv.FormatInt(x, 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []byte:
		return "x'" + hex.EncodeToString(x) + "'"
	case string:
		return strconv.Quote(x)
	}
	return fmt.Sprintf("%T(%v)", v, v)
}
