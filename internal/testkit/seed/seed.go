// Package seed fills a PostgreSQL database with what a year of a customer base leaves behind — accounts
// with their owner, keys and card top-ups, tasks with their log lines and ledger entries, and the call
// log of the last weeks — written by the database itself (INSERT … SELECT over generate_series), so a
// million tasks and twenty million call-log rows take minutes, not the days the API would. It exists for
// the scale benchmark (`make bench-scale`) and for the tests that check the query plans at size; it is
// never linked into the product.
//
// Every row is a pure function of its index: the task with index g, the call with index s. So a database
// seeded with Only and Since holds exactly the rows a full seed has for those accounts in that window, and
// the benchmark can compare a page on the full database with the same page, showing the same rows, on a
// database that holds nothing else.
//
// The shape follows the product's: ids in its formats (video_ and 24 letters or digits, req_ and 20),
// tasks completed or failed with its error codes, each with its reserve and its settle or release in the
// ledger (the money invariant of docs/design.md holds: each account's balances are the sums of its
// entries, the newest entry records them, no reservation takes available below zero), call-log rows with
// the API's paths, statuses and error codes, and accounts whose sizes follow a Zipf law: the biggest holds
// about 7.5% of everything, the ten biggest about a quarter, most a few dozen tasks.
package seed

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"videogen/billing"
	"videogen/internal/domain/catalog"
)

// Spec is what to write.
type Spec struct {
	Accounts int // accounts, each with one owner and one to three keys
	Tasks    int // tasks over TaskSpan
	Calls    int // call-log rows over CallSpan
	Now      time.Time
	// TaskSpan is how far back the tasks go (a year); CallSpan the call log (keep it within
	// CALL_LOG_RETENTION, or the retention sweep deletes the rows as soon as a server starts).
	TaskSpan, CallSpan time.Duration
	// PasswordHash is every seeded user's password hash (accounts.HashPassword), so a test or the
	// benchmark can sign in through the form; "" leaves them without a password.
	PasswordHash string
	// Only, when set, writes only these accounts (by rank: 1 is the biggest), and Since, when set, only
	// their tasks and calls from then on — the same rows a full seed writes for them.
	Only  []int
	Since time.Time
}

// Result is what was written, and how long each step took.
type Result struct {
	// BaseAccount is added to a rank to make an account id (the account of rank r is BaseAccount+r);
	// likewise BaseUser for its owner.
	BaseAccount, BaseUser int64
	Rows                  map[string]int64
	Steps                 []Step
	Took                  time.Duration
}

// Step is one statement of the seeding.
type Step struct {
	Name string
	Rows int64
	Took time.Duration
}

// AccountID is the id of the account of rank r.
func (r *Result) AccountID(rank int) int64 { return r.BaseAccount + int64(rank) }

// UserID is the id of the owner of the account of rank r.
func (r *Result) UserID(rank int) int64 { return r.BaseUser + int64(rank) }

// modelWeights is how often each model is chosen, out of 1024: the cheap ones most.
var modelWeights = map[string]int{
	"videogen-2.0-mini-480p": 300, "videogen-2.0-mini-720p": 150, "videogen-2.0-fast-480p": 120, "videogen-2.0-fast-720p": 120,
	"videogen-2.0-480p": 80, "videogen-2.0-720p": 120, "videogen-2.0-fast-1080p": 54, "videogen-2.0-1080p": 80,
}

// ratios are the aspect ratios tasks use, and how often (out of 10).
var ratios = []struct {
	ratio  string
	weight int
}{{"16:9", 7}, {"9:16", 2}, {"1:1", 1}}

var prompts = []string{
	"a lighthouse on a cliff at dusk, waves crashing, slow dolly in",
	"product shot of a ceramic mug rotating on a turntable, studio light",
	"a corgi running through autumn leaves in a park, golden hour",
	"timelapse of a city skyline from day to night, clouds moving",
	"close-up of coffee being poured into a glass cup, steam rising",
	"an astronaut walking on a red desert planet, two moons in the sky",
	"drone shot over a tropical beach, turquoise water, palm trees",
	"a paper boat floating down a rainy street gutter, shallow depth of field",
	"chef plating a dessert with a tweezer, top-down view",
	"a fox in a snowy forest looking at the camera, soft snowfall",
	"neon-lit alley in the rain at night, reflections on the ground, cinematic",
	"a hand sketching a portrait in pencil, time-lapse",
}

var companies = []string{"Northwind", "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne", "Tyrell",
	"Cyberdyne", "Soylent", "Massive Dynamic", "Pied Piper", "Aperture", "Gringotts", "Oscorp", "Wonka", "Monarch", "Dunder"}
var kinds = []string{"Studio", "Labs", "Media", "Films", "Creative", "Digital", "Productions", "Inc"}
var firstNames = []string{"maria", "james", "wei", "fatima", "lucas", "aiko", "olivia", "noah", "amara", "diego", "sofia", "ivan",
	"priya", "liam", "chloe", "omar", "emma", "kenji", "zara", "mateo"}
var lastNames = []string{"garcia", "smith", "chen", "khan", "martin", "tanaka", "johnson", "brown", "okafor", "lopez", "rossi",
	"petrov", "sharma", "murphy", "dubois", "haddad", "schmidt", "sato", "ali", "silva"}
var domains = []string{"gmail.com", "outlook.com", "proton.me", "yahoo.com", "fastmail.com", "icloud.com", "northwind.io",
	"acme-films.com", "globex.net", "pixelforge.studio"}
var zones = []string{"", "", "Europe/Paris", "America/New_York", "America/Los_Angeles", "Asia/Tokyo", "Europe/London", "Asia/Kolkata"}

// sqlText quotes a string for SQL.
func sqlText(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// sqlArray is an ARRAY[…] of quoted strings.
func sqlArray(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = sqlText(s)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]"
}

// pick is items[h mod len], in SQL, for a non-negative hash expression h.
func pick(items []string, h string) string {
	return fmt.Sprintf("(%s)[(1 + (%s) %% %d)::int]", sqlArray(items), h, len(items))
}

// hash is a deterministic 64-bit hash of an integer expression, salted by k (a C function of PostgreSQL,
// fast enough for tens of millions of rows); hashPos the same, never negative.
func hash(x string, k int) string { return fmt.Sprintf("hashint8extended(%s, %d)", x, k) }
func hashPos(x string, k int) string {
	return fmt.Sprintf("(hashint8extended(%s, %d) & 9223372036854775807)", x, k)
}

// unit is a uniform number in [0, 1) drawn from x.
func unit(x string, k int) string {
	return fmt.Sprintf("((hashint8extended(%s, %d) & 4294967295)::float8 / 4294967296.0)", x, k)
}

// idChars is n characters of the id alphabet (letters and digits) drawn from the text expression x:
// base64 of its SHA-256, with + and / replaced by letters. For the few thousand rows whose id must carry
// more than 64 bits (key prefixes: 8 characters, unique).
func idChars(x string, n int) string {
	return fmt.Sprintf("translate(substr(encode(sha256(convert_to(%s, 'UTF8')), 'base64'), 1, %d), '+/', 'Qz')", x, n)
}

// idHex is n (at most 32) hexadecimal digits drawn from the integer expression x, salted by k: letters
// and digits as the product's ids, at a quarter of idChars' cost, for the millions of rows.
func idHex(x string, k, n int) string {
	return fmt.Sprintf("substr(lpad(to_hex(hashint8extended(%[1]s, %[2]d)), 16, '0') || lpad(to_hex(hashint8extended(%[1]s, %[3]d)), 16, '0'), 1, %[4]d)", x, k, k+1, n)
}

// taskID is the SQL of the id of the task of index g.
func taskID(g string) string { return "'video_' || " + idHex(g, 101, 24) }

// requestID is the id of the call of index s: "req_" and 20 characters whose first eight count up with s,
// as the product's count up with the time (ids.AppendRequestID), so the index on request_id takes the rows
// in order. Random ones would land each on a random page of a 20-million-entry index: two and a half times
// the seeding's time.
func requestID(s string) string {
	return "'req_' || lpad(to_hex(" + s + "), 8, '0') || " + idHex(s, 141, 12)
}

// rank is the account (1 = the biggest) of the task of index g: a Zipf law with exponent 1 drawn by
// inverting its cumulative share, ln(r)/ln(A+1), so no table is looked up.
func rank(g string) string {
	return fmt.Sprintf("LEAST({A}, floor(exp(%s * ln({A} + 1.0))))::int", unit(g, 1))
}

// slot is which of its account's keys (1–3, by rank) made the task of index g.
func slot(g, r string) string { return fmt.Sprintf("(%s %% (1 + %s %% 3))::int", hashPos(g, 2), r) }

// nKeys is how many keys the account of rank r has.
func nKeys(r string) string { return "(1 + " + r + " % 3)" }

// weighted is a CASE choosing index 1..n of weights out of 1024 by the hash expression h.
func weighted(h string, weights []int) string {
	var b strings.Builder
	b.WriteString("CASE")
	acc := 0
	for i, w := range weights[:len(weights)-1] {
		acc += w
		fmt.Fprintf(&b, " WHEN %s < %d THEN %d", h, acc, i+1)
	}
	fmt.Fprintf(&b, " ELSE %d END", len(weights))
	return b.String()
}

// Seed writes spec into the database, after its migrations, and ANALYZEs what it wrote.
func Seed(ctx context.Context, db *sql.DB, spec Spec, logf func(format string, args ...any)) (*Result, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if spec.Accounts < 1 || spec.Tasks < 1 || spec.Calls < 0 || spec.TaskSpan <= 0 || spec.CallSpan <= 0 {
		return nil, fmt.Errorf("seed: accounts, tasks and spans must be positive")
	}
	conn, err := db.Conn(ctx) // one session: the temporary table and the settings below are its own
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	defer conn.Close()
	res := &Result{Rows: map[string]int64{}}
	start := time.Now()

	var baseKey, baseLedger int64
	if err := conn.QueryRowContext(ctx, `SELECT (SELECT COALESCE(MAX(id), 0) FROM accounts), (SELECT COALESCE(MAX(id), 0) FROM users),
		(SELECT COALESCE(MAX(id), 0) FROM api_keys), (SELECT COALESCE(MAX(id), 0) FROM ledger_entries)`).Scan(&res.BaseAccount, &res.BaseUser, &baseKey, &baseLedger); err != nil {
		return nil, fmt.Errorf("seed: read the tables' last ids: %w", err)
	}
	now := spec.Now.UTC().Truncate(time.Microsecond)
	taskEnd := now.Add(-10 * time.Minute) // the newest task has finished by now
	taskStart := taskEnd.Add(-spec.TaskSpan)
	callStart := now.Add(-spec.CallSpan)
	taskStep := float64(taskEnd.Sub(taskStart).Microseconds()) / float64(spec.Tasks)
	callStep := float64(now.Sub(callStart).Microseconds()) / float64(max(spec.Calls, 1))
	ts := func(t time.Time) string { return "'" + t.Format("2006-01-02 15:04:05.999999") + "+00'::timestamptz" }

	// The first task and call index at or after Since (one early: the jitter moves a row by less than one step).
	g0, s0 := 0, 0
	if !spec.Since.IsZero() {
		g0 = max(0, int(float64(spec.Since.Sub(taskStart).Microseconds())/taskStep)-1)
		s0 = max(0, int(float64(spec.Since.Sub(callStart).Microseconds())/callStep)-1)
	}
	only := "TRUE"
	onlyRanks := "TRUE"
	if len(spec.Only) > 0 {
		rs := make([]string, len(spec.Only))
		for i, r := range spec.Only {
			rs[i] = strconv.Itoa(r)
		}
		only = "rank IN (" + strings.Join(rs, ", ") + ")"
		onlyRanks = "r IN (" + strings.Join(rs, ", ") + ")"
	}
	since := "TRUE"
	if !spec.Since.IsZero() {
		since = "created >= " + ts(spec.Since.UTC())
	}
	callSince := "TRUE"
	if !spec.Since.IsZero() {
		callSince = "at >= " + ts(spec.Since.UTC())
	}

	// The models, their prices and sizes, as arrays indexed by the model's number.
	var ids []string
	var weights []int
	for _, m := range catalog.Models {
		ids = append(ids, m.ID)
	}
	sort.Strings(ids) // a fixed order whatever the catalog's
	var prices, sizes []string
	for _, id := range ids {
		weights = append(weights, modelWeights[id])
		prices = append(prices, strconv.FormatInt(int64(billing.DefaultPrices[id]), 10))
		m, _ := catalog.Lookup(id)
		for _, r := range ratios {
			s, _ := m.Size(r.ratio)
			sizes = append(sizes, s)
		}
	}
	var ratioNames []string
	var ratioWeights []int
	for _, r := range ratios {
		ratioNames = append(ratioNames, r.ratio)
		ratioWeights = append(ratioWeights, r.weight*1024/10)
	}
	ratioWeights[len(ratioWeights)-1] = 1024 - (ratioWeights[0] + ratioWeights[1])

	rep := strings.NewReplacer(
		"{A}", strconv.Itoa(spec.Accounts), "{T}", strconv.Itoa(spec.Tasks), "{C}", strconv.Itoa(spec.Calls),
		"{BASE_ACCT}", strconv.FormatInt(res.BaseAccount, 10), "{BASE_USER}", strconv.FormatInt(res.BaseUser, 10),
		"{BASE_KEY}", strconv.FormatInt(baseKey, 10), "{BASE_LEDGER}", strconv.FormatInt(baseLedger, 10),
		"{TASK_START}", ts(taskStart), "{TASK_STEP}", strconv.FormatFloat(taskStep, 'f', 6, 64),
		"{CALL_START}", ts(callStart), "{CALL_STEP}", strconv.FormatFloat(callStep, 'f', 6, 64), "{NOW}", ts(now),
		"{G0}", strconv.Itoa(g0), "{S0}", strconv.Itoa(s0), "{ONLY}", only, "{ONLY_R}", onlyRanks, "{SINCE}", since, "{CALL_SINCE}", callSince,
		"{MODELS}", sqlArray(ids), "{PRICES}", "ARRAY["+strings.Join(prices, ", ")+"]::bigint[]", "{SIZES}", sqlArray(sizes),
		"{RATIOS}", sqlArray(ratioNames), "{PW}", sqlText(spec.PasswordHash),
	)
	step := func(name, q string) error {
		t := time.Now()
		r, err := conn.ExecContext(ctx, rep.Replace(q))
		if err != nil {
			return fmt.Errorf("seed %s: %w", name, err)
		}
		n, _ := r.RowsAffected()
		res.Steps = append(res.Steps, Step{Name: name, Rows: n, Took: time.Since(t)})
		if n > 0 {
			res.Rows[name] += n
		}
		logf("seed: %s: %d rows in %s", name, n, time.Since(t).Round(time.Millisecond))
		return nil
	}

	// Sorts and hashes of millions of rows: give this session the memory for them. Its commits need not
	// wait for the disk either; nothing else about the database changes.
	for _, set := range []string{"SET work_mem = '1GB'", "SET maintenance_work_mem = '512MB'", "SET synchronous_commit = off"} {
		if _, err := conn.ExecContext(ctx, set); err != nil {
			return nil, fmt.Errorf("seed: %s: %w", set, err)
		}
	}
	defer func() { _, _ = conn.ExecContext(context.Background(), "RESET ALL") }()

	modelCase := weighted(hashPos("g", 4)+" & 1023", weights)
	ratioCase := weighted(hashPos("g", 5)+" & 1023", ratioWeights)
	steps := []struct{ name, q string }{
		{"accounts", `INSERT INTO accounts (id, name, available_micros, reserved_micros, waiting_tasks, created_at, updated_at, time_zone)
			SELECT {BASE_ACCT} + r, ` + pick(companies, hashPos("r", 21)) + ` || ' ' || ` + pick(kinds, hashPos("r", 22)) + `, 0, 0, 0, created, created,
				` + pick(zones, hashPos("r", 23)) + `
			FROM (SELECT r, {TASK_START} - interval '1 day' - (` + hashPos("r", 20) + ` % 2592000) * interval '1 second' AS created
				FROM generate_series(1, {A}) r) a WHERE {ONLY_R}`},
		{"users", `INSERT INTO users (id, account_id, email, password_hash, role, email_verified_at, created_at, updated_at, terms_accepted_at, time_zone, account_role)
			SELECT {BASE_USER} + r, a.id, ` + pick(firstNames, hashPos("r", 24)) + ` || '.' || ` + pick(lastNames, hashPos("r", 25)) + ` || r || '@' || ` + pick(domains, hashPos("r", 26)) + `,
				{PW}, 'member', a.created_at, a.created_at, a.created_at, a.created_at, '', 'owner'
			FROM generate_series(1, {A}) r JOIN accounts a ON a.id = {BASE_ACCT} + r WHERE {ONLY_R}`},
		{"api_keys", `INSERT INTO api_keys (id, account_id, created_by, name, prefix, secret_hash, created_at, last_used_at)
			SELECT {BASE_KEY} + (r - 1) * 3 + i + 1, {BASE_ACCT} + r, {BASE_USER} + r, (ARRAY['production', 'staging', 'batch jobs'])[i + 1],
				'vg_' || ` + idChars("'k' || r || '.' || i", 8) + `, encode(sha256(convert_to('seeded key ' || r || '.' || i, 'UTF8')), 'hex'),
				a.created_at + i * interval '20 days', {NOW} - (` + hashPos("r * 3 + i", 27) + ` % 86400) * interval '1 second'
			FROM generate_series(1, {A}) r JOIN accounts a ON a.id = {BASE_ACCT} + r
			CROSS JOIN LATERAL generate_series(0, ` + nKeys("r") + ` - 1) i WHERE {ONLY_R}`},
		// The tasks, finished: completed (88%) or failed with one of the worker's codes or cancelled.
		{"tasks", `INSERT INTO tasks (id, account_id, api_key_id, model, prompt, seconds, size, aspect_ratio, generate_audio, watermark, inputs,
				status, progress, price_micros, amount_micros, billing_state, error_code, error_message, upstream_task_id, submit_attempts, poll_count,
				next_check_at, queue_deadline, run_deadline, submitted_at, output_bytes, created_at, updated_at, completed_at, expires_at,
				upstream_model, usage_completion_tokens, usage_total_tokens, upstream_cost_micros, deleted_at)
			SELECT ` + taskID("g") + `, {BASE_ACCT} + rank, {BASE_KEY} + (rank - 1) * 3 + ` + slot("g", "rank") + ` + 1,
				({MODELS})[mi], ` + pick(prompts, hashPos("g", 9)) + `, secs, ({SIZES})[(mi - 1) * 3 + ri], ({RATIOS})[ri],
				` + hash("g", 11) + ` & 3 = 0, FALSE, '{}',
				CASE WHEN code = '' THEN 'completed' ELSE 'failed' END, CASE WHEN code = '' THEN 100 WHEN submitted THEN 40 ELSE 0 END,
				({PRICES})[mi], ({PRICES})[mi] * secs, CASE WHEN code = '' THEN 'settled' ELSE 'released' END,
				NULLIF(code, ''), CASE code WHEN '' THEN NULL
					WHEN 'generation_failed' THEN 'The provider could not generate this video. Your reservation was released; try again or change the prompt.'
					WHEN 'content_policy_violation' THEN 'The prompt or an input was refused by the content policy. Your reservation was released.'
					WHEN 'cancelled' THEN 'Cancelled by the customer (DELETE /v1/videos). Your reservation was released.'
					ELSE 'No generation capacity became free in time. Your reservation was released; create the task again.' END,
				CASE WHEN submitted THEN 'simtask_' || ` + idHex("g", 111, 24) + ` END, CASE WHEN submitted THEN 1 ELSE 0 END,
				CASE WHEN submitted THEN 3 + ` + hashPos("g", 12) + ` % 12 ELSE 0 END,
				done, created + interval '24 hours', CASE WHEN submitted THEN created + interval '1 hour' END,
				CASE WHEN submitted THEN created + interval '2 seconds' END,
				CASE WHEN code = '' THEN 2000000 + ` + hashPos("g", 13) + ` % 8000000 END,
				created, done, done, CASE WHEN code = '' THEN done + interval '7 days' END,
				CASE WHEN code = '' THEN 'seedance-2.0' END, CASE WHEN code = '' THEN secs * 25000 END, CASE WHEN code = '' THEN secs * 25000 END,
				CASE WHEN code = '' THEN ({PRICES})[mi] * secs * 6 / 10 END,
				CASE WHEN code = '' AND ` + hashPos("g", 10) + ` % 100 = 0 AND done + interval '1 hour' < {NOW} THEN done + interval '1 hour' END
			FROM (
				SELECT g, rank, created, mi, ri, secs, code, code NOT IN ('cancelled', 'queue_timeout') AS submitted,
					created + ((CASE WHEN code IN ('cancelled', 'queue_timeout') THEN 20 ELSE 30 END) + ` + hashPos("g", 8) + ` % 240) * interval '1 second' AS done
				FROM (
					SELECT g, ` + rank("g") + ` AS rank,
						{TASK_START} + ((g + 0.999 * ` + unit("g", 3) + `) * {TASK_STEP})::bigint * interval '1 microsecond' AS created,
						` + modelCase + ` AS mi, ` + ratioCase + ` AS ri,
						(ARRAY[4, 4, 4, 4, 5, 6, 8, 10, 10, 12, 15, 15])[(1 + ` + hashPos("g", 6) + ` % 12)::int] AS secs,
						CASE WHEN ` + hashPos("g", 7) + ` & 1023 < 900 THEN ''
							WHEN ` + hashPos("g", 7) + ` & 1023 < 950 THEN 'generation_failed'
							WHEN ` + hashPos("g", 7) + ` & 1023 < 990 THEN 'content_policy_violation'
							WHEN ` + hashPos("g", 7) + ` & 1023 < 1010 THEN 'cancelled'
							ELSE 'queue_timeout' END AS code
					FROM (SELECT generate_series({G0}, {T} - 1) AS g) n OFFSET 0
				) a WHERE {ONLY} AND {SINCE} OFFSET 0
			) t`},
		// Each task's log: created, then for those sent upstream accepted and started, then the end.
		{"task_events", `INSERT INTO task_events (task_id, at, from_status, to_status, detail)
			SELECT t.id, e.at, e.from_status, e.to_status, e.detail
			FROM tasks t CROSS JOIN LATERAL (VALUES
				(1, t.created_at, '', 'queued', 'created; $' || to_char(t.amount_micros / 1000000.0, 'FM999990.000000') || ' reserved (' || t.seconds || ' s at $' || to_char(t.price_micros / 1000000.0, 'FM999990.000000') || '/s)'),
				(2, t.submitted_at, 'queued', 'queued', 'accepted upstream as ' || t.upstream_task_id),
				(3, t.submitted_at + interval '1 second', 'queued', 'in_progress', 'generation started upstream'),
				(4, t.completed_at, CASE WHEN t.submitted_at IS NULL THEN 'queued' ELSE 'in_progress' END, t.status,
					CASE WHEN t.status = 'completed' THEN 'output copied (' || t.output_bytes || ' bytes); $' || to_char(t.amount_micros / 1000000.0, 'FM999990.000000') || ' charged'
					ELSE t.error_code || ': ' || t.error_message END)
			) AS e(n, at, from_status, to_status, detail)
			WHERE t.account_id > {BASE_ACCT} AND t.account_id <= {BASE_ACCT} + {A} AND (e.n IN (1, 4) OR t.submitted_at IS NOT NULL)`},
		// One card top-up per account when it opened, enough for everything it then spent, and some left.
		{"topups", `INSERT INTO topups (id, account_id, user_id, source, state, amount_micros, credited_micros, stripe_session_id, created_at, updated_at, credited_at)
			SELECT 'topup_' || ` + idHex("a.id - {BASE_ACCT}", 121, 24) + `, a.id, {BASE_USER} + (a.id - {BASE_ACCT}), 'checkout', 'credited', amt, amt,
				'cs_live_' || ` + idHex("a.id - {BASE_ACCT}", 131, 32) + `, a.created_at + interval '1 hour', a.created_at + interval '1 hour', a.created_at + interval '1 hour'
			FROM (SELECT a.id, a.created_at, (CEIL(COALESCE(SUM(t.amount_micros), 0) * 1.1 / 1000000.0) + 50)::bigint * 1000000 AS amt
				FROM accounts a LEFT JOIN tasks t ON t.account_id = a.id
				WHERE a.id > {BASE_ACCT} AND a.id <= {BASE_ACCT} + {A} GROUP BY a.id, a.created_at) a`},
		// The ledger, ids in time order as the product appends it (a statement cuts an account's ledger by
		// id): each top-up's credit, each task's reserve and its settle or release, with the balances after each.
		{"ledger_entries", `INSERT INTO ledger_entries (id, account_id, kind, delta_available, delta_reserved, available_after, reserved_after, task_id, reason, actor, external_id, created_at)
			SELECT {BASE_LEDGER} + row_number() OVER (ORDER BY created_at, account_id, ord, task_id), account_id, kind, da, dr,
				SUM(da) OVER w, SUM(dr) OVER w, task_id, reason, actor, external_id, created_at
			FROM (
				SELECT account_id, 'topup' AS kind, credited_micros AS da, 0::bigint AS dr, NULL::text AS task_id, 'card top-up ' || id AS reason,
					'stripe' AS actor, stripe_session_id AS external_id, credited_at AS created_at, 0 AS ord
				FROM topups WHERE account_id > {BASE_ACCT} AND account_id <= {BASE_ACCT} + {A}
				UNION ALL
				SELECT account_id, 'reserve', -amount_micros, amount_micros, id, '', '', NULL, created_at, 1
				FROM tasks WHERE account_id > {BASE_ACCT} AND account_id <= {BASE_ACCT} + {A}
				UNION ALL
				SELECT account_id, CASE WHEN status = 'completed' THEN 'settle' ELSE 'release' END,
					CASE WHEN status = 'completed' THEN 0 ELSE amount_micros END, -amount_micros, id, '', '', NULL, completed_at, 2
				FROM tasks WHERE account_id > {BASE_ACCT} AND account_id <= {BASE_ACCT} + {A}
			) e
			WINDOW w AS (PARTITION BY account_id ORDER BY created_at, ord, task_id ROWS UNBOUNDED PRECEDING)`},
		{"ledger sequence", `SELECT setval(pg_get_serial_sequence('ledger_entries', 'id'), (SELECT MAX(id) FROM ledger_entries))`},
		{"balances", `UPDATE accounts a SET available_micros = s.av, reserved_micros = s.rs, updated_at = s.at
			FROM (SELECT account_id, SUM(delta_available) AS av, SUM(delta_reserved) AS rs, MAX(created_at) AS at FROM ledger_entries
				WHERE account_id > {BASE_ACCT} AND account_id <= {BASE_ACCT} + {A} GROUP BY account_id) s
			WHERE a.id = s.account_id`},
		{"sequences", `SELECT setval(pg_get_serial_sequence('accounts', 'id'), GREATEST((SELECT MAX(id) FROM accounts), {BASE_ACCT} + {A})),
				setval(pg_get_serial_sequence('users', 'id'), GREATEST((SELECT MAX(id) FROM users), {BASE_USER} + {A})),
				setval(pg_get_serial_sequence('api_keys', 'id'), GREATEST((SELECT MAX(id) FROM api_keys), {BASE_KEY} + {A} * 3))`},
		// The call log, in time order as the API writes it: each call is about a task created shortly
		// before (polls, downloads, the create itself), made with that task's key; a few fail.
		{"call_logs", `INSERT INTO call_logs (at, request_id, account_id, key_prefix, method, path, status, error_code, latency_micros, task_id, amount_reserved_micros, bytes_in, files)
			SELECT at, ` + requestID("s") + `, CASE WHEN status = 401 THEN NULL ELSE {BASE_ACCT} + rank END,
				CASE WHEN status = 401 THEN '' ELSE k.prefix END, method,
				CASE WHEN path = '{task}' THEN '/v1/videos/' || tid WHEN path = '{content}' THEN '/v1/videos/' || tid || '/content'
					WHEN path = '{missing}' THEN '/v1/videos/video_' || ` + idHex("s", 151, 24) + ` ELSE path END,
				status, code, latency, CASE WHEN path IN ('{task}', '{content}') OR (method = 'POST' AND status = 200) THEN tid ELSE '' END,
				CASE WHEN method = 'POST' AND status = 200 THEN ({PRICES})[mi] * secs ELSE 0 END,
				CASE WHEN method = 'POST' THEN 90 + ` + hashPos("s", 34) + ` % 300 ELSE 0 END, 0
			FROM (
				SELECT s, at, g, rank, ` + taskID("g") + ` AS tid, ` + slot("g", "rank") + ` AS sl, ` + modelCase + ` AS mi,
					(ARRAY[4, 4, 4, 4, 5, 6, 8, 10, 10, 12, 15, 15])[(1 + ` + hashPos("g", 6) + ` % 12)::int] AS secs,
					(CASE WHEN kind < 780 THEN ARRAY['GET', '{task}', '200', '']
						WHEN kind < 820 THEN ARRAY['POST', '/v1/videos', '200', '']
						WHEN kind < 870 THEN ARRAY['GET', '{content}', '200', '']
						WHEN kind < 910 THEN ARRAY['GET', '/v1/videos', '200', '']
						WHEN kind < 925 THEN ARRAY['GET', '/v1/models', '200', '']
						WHEN kind < 945 THEN ARRAY['GET', '{task}', '429', 'rate_limited']
						WHEN kind < 960 THEN ARRAY['GET', '{missing}', '404', 'not_found']
						WHEN kind < 975 THEN ARRAY['POST', '/v1/videos', '400', 'invalid_request']
						WHEN kind < 985 THEN ARRAY['POST', '/v1/videos', '402', 'insufficient_balance']
						WHEN kind < 995 THEN ARRAY['GET', '{task}', '401', 'invalid_api_key']
						WHEN kind < 1000 THEN ARRAY['GET', '{task}', '500', 'internal_error']
						WHEN kind < 1010 THEN ARRAY['POST', '/v1/videos', '503', 'no_capacity']
						ELSE ARRAY['DELETE', '{task}', '200', ''] END) AS c
				FROM (
					SELECT s, at, kind, g, ` + rank("g") + ` AS rank
					FROM (
						SELECT s, at, kind, GREATEST(0, LEAST({T} - 1,
							floor(EXTRACT(EPOCH FROM at - {TASK_START}) * 1000000 / {TASK_STEP})::bigint
							- CASE WHEN kind >= 780 AND kind < 820 THEN 0 ELSE ` + hashPos("s", 32) + ` % 64 END)) AS g
						FROM (
							SELECT s, {CALL_START} + ((s + 0.999 * ` + unit("s", 30) + `) * {CALL_STEP})::bigint * interval '1 microsecond' AS at,
								` + hashPos("s", 31) + ` & 1023 AS kind
							FROM (SELECT generate_series({S0}, {C} - 1) AS s) n OFFSET 0
						) a WHERE {CALL_SINCE} OFFSET 0
					) b OFFSET 0
				) c WHERE {ONLY} OFFSET 0
			) x CROSS JOIN LATERAL (SELECT x.c[1] AS method, x.c[2] AS path, x.c[3]::int AS status, x.c[4] AS code,
					CASE WHEN x.c[2] = '{content}' THEN 40000 + ` + hashPos("x.s", 33) + ` % 900000
						WHEN x.c[1] = 'POST' THEN 12000 + ` + hashPos("x.s", 33) + ` % 60000
						ELSE 1500 + ` + hashPos("x.s", 33) + ` % 12000 END AS latency) l
			JOIN api_keys k ON k.id = {BASE_KEY} + (x.rank - 1) * 3 + x.sl + 1`},
	}
	for _, s := range steps {
		if err := step(s.name, s.q); err != nil {
			return nil, err
		}
	}
	// VACUUM too, as autovacuum long since would have on a year of data: the visibility map lets index-only
	// scans skip the table, and the rows' hint bits are set once here rather than by the first pages read.
	for _, table := range []string{"accounts", "users", "api_keys", "tasks", "task_events", "topups", "ledger_entries", "call_logs"} {
		if err := step("vacuum "+table, "VACUUM ANALYZE "+table); err != nil {
			return nil, err
		}
	}
	res.Took = time.Since(start)
	return res, nil
}
