package main

import (
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// createScript is the create transaction as videogen runs it on PostgreSQL (videos.Service.create: the
// key's limits, the task, its first log line, the backlog count, the reservation and its ledger entry),
// for pgbench. The price is read from memory and the key authenticated from its cache in videogen, so
// neither is here; the bench's keys have no spend limit, so their row is read, not locked.
const createScript = `\set acct random(1, %d)
\set tid random(1, 1000000000000000)
BEGIN;
SELECT k.spend_limit_micros, k.limit_period, k.allowed_models, a.time_zone FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = :acct;
INSERT INTO tasks (id, account_id, api_key_id, model, prompt, seconds, size, aspect_ratio, generate_audio, watermark, inputs, status, progress,
  price_micros, amount_micros, billing_state, error_code, error_message, credential_id, upstream_task_id, upstream_key, submit_attempts, poll_count,
  next_check_at, queue_deadline, run_deadline, submitted_at, lease_owner, lease_until, output_key, output_bytes, created_at, updated_at, completed_at, expires_at)
  VALUES ('video_' || :tid, :acct, :acct, 'videogen-2.0-mini-480p', 'benchmark load', 4, '864x496', '16:9', false, false, '{}', 'queued', 0,
  50000, 200000, 'reserved', NULL, NULL, NULL, NULL, NULL, 0, 0, now(), now() + interval '24 hours', NULL, NULL, NULL, NULL, NULL, NULL, now(), now(), NULL, NULL);
INSERT INTO task_events (task_id, at, from_status, to_status, detail) VALUES ('video_' || :tid, now(), '', 'queued', 'created; $0.200000 reserved (4 s at $0.050000/s)');
UPDATE accounts SET waiting_tasks = waiting_tasks + 1 WHERE id = :acct AND waiting_tasks < 100000000;
UPDATE accounts SET available_micros = available_micros + -200000, reserved_micros = reserved_micros + 200000, updated_at = now()
  WHERE id = :acct AND available_micros + -200000 >= 0 RETURNING available_micros, reserved_micros;
INSERT INTO ledger_entries (account_id, kind, delta_available, delta_reserved, available_after, reserved_after, task_id, reason, actor, external_id, created_at)
  VALUES (:acct, 'reserve', -200000, 200000, 0, 0, 'video_' || :tid, '', '', NULL, now());
END;
`

// createCeiling runs the create transaction's statements with pgbench (prepared, as pgx runs them; as
// many clients as the load process has connections) against the database videogen just used, and
// returns transactions per second: the most creates that database could take.
func (b *bench) createCeiling(dbURL string) float64 {
	if _, err := exec.LookPath("pgbench"); err != nil {
		log.Printf("pgbench not found (apt-get install postgresql-client); the create ceiling is not measured")
		return 0
	}
	script := filepath.Join(b.work, "create.sql")
	_ = os.WriteFile(script, []byte(fmt.Sprintf(createScript, b.accounts)), 0o600)
	var tps []float64
	for i := 0; i < b.runs; i++ {
		out, err := exec.Command("pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(b.conns), "-j", "2",
			"-T", strconv.Itoa(int(b.duration.Seconds())), "-f", script, dbURL).CombinedOutput()
		if err != nil {
			log.Fatalf("pgbench: %v\n%s", err, out)
		}
		v, _ := strconv.ParseFloat(strings.Fields(between(string(out), "tps = ", "\n"))[0], 64)
		log.Printf("raw-SQL create ceiling: %.0f transactions/s", v)
		tps = append(tps, v)
	}
	sort.Float64s(tps)
	return tps[len(tps)/2]
}
