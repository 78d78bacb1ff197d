package tasks

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"videogen/billing"
	"videogen/internal/infra/ids"
	"videogen/models"
)

// Routing is what the task store needs of the upstream pool to give waiting tasks a credential: the pool
// knows which credentials may take a task, the database how many slots each has free.
type Routing struct {
	// Credentials are the credentials taking new tasks and healthy on this instance.
	Credentials []string
	// Aliases lists the model aliases the given credentials serve.
	Aliases func(credIDs []string) []string
	// Candidates lists the credentials that may take t (serving its alias on a usable route, rendering
	// it, accepting its inputs, healthy); an error means the task's stored inputs cannot be read.
	Candidates func(t *models.Task) ([]string, error)
	// UpstreamModel is the provider's model the credential serves the alias as; "" when it no longer
	// serves it (a reload raced the choice).
	UpstreamModel func(credID, alias string) string
}

// Assigned is what AssignWaiting claimed: tasks given a credential, ready to submit (their first
// attempt recorded), and tasks whose stored inputs cannot be read (claimed, for the caller to fail).
type Assigned struct {
	Tasks      []models.Task
	Unreadable []models.Task
}

// errStalePlan: a credential's free slots were taken by another instance between the read and the
// guarded increment; the transaction is rolled back and tried again with fresh counts.
var errStalePlan = errors.New("a credential's free slots changed while assigning")

// AssignWaiting claims up to limit waiting tasks, oldest first, among those of aliases a credential with
// room serves, and gives each the least-loaded candidate credential with a free slot (in flight over
// capacity, then in flight, then id), a fresh upstream idempotency key and the provider model that
// credential serves the alias as, in one transaction before any upstream call (docs/architecture.md,
// "The path of a task"). Each such task leaves its account's backlog, counts against its credential's
// in_flight, gets the log line of its first submission attempt, and stays leased to owner for the
// submission. A claimed task no candidate has room for is left waiting, due again at retry; a task past
// its queue deadline is not claimed (the sweep fails it).
//
// One transaction serves the whole batch, so a credential's row is written once per batch rather than
// once per task. Locks are taken in the order every transaction of this package takes them — tasks,
// then accounts, then credentials (lockOrder) — so that two transactions never wait on each other: the
// tasks with SKIP LOCKED, the accounts and credentials in id order. A credential's free slots are read
// without a lock and its increment is guarded (in_flight + n <= max_concurrency); when another
// instance took the slots meanwhile, the whole batch is tried again with fresh counts. The credential's
// row is thus locked only for its last statement and the commit.
func (s *Store) AssignWaiting(ctx context.Context, owner string, lease time.Duration, limit int, r Routing, runTimeout time.Duration, retry time.Time) (Assigned, error) {
	if limit <= 0 || len(r.Credentials) == 0 {
		return Assigned{}, nil
	}
	for attempt := 0; ; attempt++ {
		var out Assigned
		err := s.db.Tx(ctx, func(tx *gorm.DB) error {
			var err error
			out, err = s.assignWaiting(tx, owner, lease, limit, r, runTimeout, retry)
			return err
		})
		if errors.Is(err, errStalePlan) && attempt < 4 {
			continue
		}
		if errors.Is(err, errStalePlan) {
			return Assigned{}, nil // the slots went to other instances: nothing to do this round
		}
		if err != nil {
			return Assigned{}, fmt.Errorf("assign waiting tasks: %w", err)
		}
		return out, nil
	}
}

// slotCount is a credential's load as read for a plan.
type slotCount struct {
	ID             string
	InFlight       int64
	MaxConcurrency int64
}

func (s *Store) assignWaiting(tx *gorm.DB, owner string, lease time.Duration, limit int, r Routing, runTimeout time.Duration, retry time.Time) (Assigned, error) {
	now := s.Now()
	var creds []slotCount
	if err := tx.Raw("SELECT id, in_flight, max_concurrency FROM upstream_credentials WHERE enabled = ? AND auth_error IS NULL AND in_flight < max_concurrency AND id IN ?",
		true, r.Credentials).Scan(&creds).Error; err != nil {
		return Assigned{}, fmt.Errorf("count free slots: %w", err)
	}
	var free int64
	withRoom := make([]string, 0, len(creds))
	for _, c := range creds {
		free += c.MaxConcurrency - c.InFlight
		withRoom = append(withRoom, c.ID)
	}
	aliases := r.Aliases(withRoom)
	if free == 0 || len(aliases) == 0 {
		return Assigned{}, nil
	}
	var waiting []models.Task
	// A task past its queue deadline is not started: the sweep fails it (QUEUE_TIMEOUT).
	if err := tx.Raw("SELECT * FROM tasks WHERE credential_id IS NULL AND status = 'queued' AND model IN ? AND next_check_at <= ? AND (lease_until IS NULL OR lease_until < ?) AND queue_deadline >= ? ORDER BY created_at, id LIMIT ?"+s.skipLocked(),
		aliases, now, now, now, min(free, int64(limit))).Scan(&waiting).Error; err != nil {
		return Assigned{}, fmt.Errorf("claim queued tasks: %w", err)
	}
	if len(waiting) == 0 {
		return Assigned{}, nil
	}
	p := newSlotPlan(creds)
	var out Assigned
	var left []string // claimed, but no candidate has room: due again at retry
	for i := range waiting {
		t := &waiting[i]
		cands, err := r.Candidates(t)
		if err != nil {
			out.Unreadable = append(out.Unreadable, *t)
			continue
		}
		credID, ok := p.take(cands)
		model := ""
		if ok {
			model = r.UpstreamModel(credID, t.Model)
		}
		if model == "" {
			if ok {
				p.give(credID) // a reload took the alias from this credential since it was read
			}
			left = append(left, t.ID)
			continue
		}
		key := ids.NewUpstreamIdempotencyKey()
		t.CredentialID, t.UpstreamKey, t.UpstreamModel, t.SubmitAttempts, t.SubmittedAt = &credID, &key, &model, 1, &now
		deadline := now.Add(runTimeout)
		t.RunDeadline = &deadline
		out.Tasks = append(out.Tasks, *t)
	}
	until := now.Add(lease)
	if err := s.recordAssignments(tx, out.Tasks, owner, until, now); err != nil {
		return Assigned{}, err
	}
	if len(out.Unreadable) > 0 {
		unreadable := make([]string, len(out.Unreadable))
		for i := range out.Unreadable {
			unreadable[i] = out.Unreadable[i].ID
			out.Unreadable[i].LeaseOwner, out.Unreadable[i].LeaseUntil = &owner, &until
		}
		if err := tx.Exec("UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE id IN ?", owner, until, unreadable).Error; err != nil {
			return Assigned{}, fmt.Errorf("claim tasks with unreadable inputs: %w", err)
		}
	}
	if len(left) > 0 {
		if err := tx.Exec("UPDATE tasks SET next_check_at = ? WHERE id IN ?", retry, left).Error; err != nil {
			return Assigned{}, fmt.Errorf("put back tasks no credential has room for: %w", err)
		}
	}
	return out, nil
}

// recordAssignments writes assigned tasks (each carrying its credential, key, model and run deadline) for
// worker owner, leasing them to it until leaseUntil: the tasks in one statement, the accounts' backlogs in one, each credential's in_flight in one, guarded
// (errStalePlan when another instance took the slots meanwhile), and the log lines in one.
func (s *Store) recordAssignments(tx *gorm.DB, assigned []models.Task, owner string, leaseUntil, now time.Time) error {
	if len(assigned) == 0 {
		return nil
	}
	// Tasks: locked by the claim (PostgreSQL) or by the single writer (SQLite); the guard is kept so that
	// a task some other path changed is never assigned twice.
	rows := make([]string, len(assigned))
	args := []any{now, *assigned[0].RunDeadline, now, owner, leaseUntil}
	perAccount := map[int64]int64{}
	perCred := map[string]int64{}
	events := make([]models.TaskEvent, len(assigned))
	for i, t := range assigned {
		rows[i] = "(?, ?, ?, ?)"
		args = append(args, t.ID, *t.CredentialID, *t.UpstreamKey, *t.UpstreamModel)
		perAccount[t.AccountID]++
		perCred[*t.CredentialID]++
		detail := fmt.Sprintf("submission attempt 1 on upstream credential %s (model %s), idempotency key %s (worker %s)", *t.CredentialID, *t.UpstreamModel, *t.UpstreamKey, owner)
		events[i] = event(t.ID, now, t.Status, t.Status, detail)
	}
	res := tx.Exec(`UPDATE tasks SET credential_id = v.column2, upstream_key = v.column3, upstream_model = v.column4, submit_attempts = 1,
		submitted_at = ?, run_deadline = ?, updated_at = ?, lease_owner = ?, lease_until = ? FROM (VALUES `+strings.Join(rows, ", ")+`) AS v
		WHERE tasks.id = v.column1 AND tasks.status = 'queued' AND tasks.credential_id IS NULL`, args...)
	if res.Error != nil {
		return fmt.Errorf("assign credentials: %w", res.Error)
	}
	if res.RowsAffected != int64(len(assigned)) {
		return fmt.Errorf("assign credentials: %d of %d tasks still waiting", res.RowsAffected, len(assigned))
	}
	// Accounts, in id order: every task here leaves its account's backlog.
	accts := slices.Sorted(maps.Keys(perAccount))
	if err := billing.LockAccounts(tx, accts); err != nil {
		return err
	}
	rows, args = rows[:0], args[:0]
	for _, id := range accts {
		rows = append(rows, "(CAST(? AS BIGINT), CAST(? AS BIGINT))")
		args = append(args, id, perAccount[id])
	}
	if err := tx.Exec(`UPDATE accounts SET waiting_tasks = CASE WHEN waiting_tasks > v.column2 THEN waiting_tasks - v.column2 ELSE 0 END
		FROM (VALUES `+strings.Join(rows, ", ")+`) AS v WHERE accounts.id = v.column1`, args...).Error; err != nil {
		return fmt.Errorf("leave backlog: %w", err)
	}
	// Credentials last, in id order, each guarded on its capacity.
	credIDs := slices.Sorted(maps.Keys(perCred))
	for _, id := range credIDs {
		n := perCred[id]
		res := tx.Exec("UPDATE upstream_credentials SET in_flight = in_flight + ?, updated_at = ? WHERE id = ? AND in_flight + ? <= max_concurrency", n, now, id, n)
		if res.Error != nil {
			return fmt.Errorf("take slots on %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return errStalePlan
		}
	}
	if err := tx.Create(&events).Error; err != nil {
		return fmt.Errorf("task events: %w", err)
	}
	return nil
}

// slotPlan hands out a batch's free slots in memory, least loaded first, as the database would one by
// one.
type slotPlan struct {
	creds map[string]*slotCount
}

func newSlotPlan(creds []slotCount) *slotPlan {
	p := &slotPlan{creds: make(map[string]*slotCount, len(creds))}
	for i := range creds {
		p.creds[creds[i].ID] = &creds[i]
	}
	return p
}

// take counts one more task on the least-loaded candidate with room (in flight over capacity, then in
// flight, then id); ok is false when none has room.
func (p *slotPlan) take(candidates []string) (string, bool) {
	var best *slotCount
	for _, id := range candidates {
		c, ok := p.creds[id]
		if !ok || c.InFlight >= c.MaxConcurrency {
			continue
		}
		if best == nil || less(c, best) {
			best = c
		}
	}
	if best == nil {
		return "", false
	}
	best.InFlight++
	return best.ID, true
}

// give returns a slot take counted.
func (p *slotPlan) give(id string) { p.creds[id].InFlight-- }

// less orders credentials by load: the share of capacity in flight (in millionths, as an integer, so the
// order is the same on every engine), then in flight, then id.
func less(a, b *slotCount) bool {
	sa, sb := a.InFlight*1_000_000/a.MaxConcurrency, b.InFlight*1_000_000/b.MaxConcurrency
	if sa != sb {
		return sa < sb
	}
	if a.InFlight != b.InFlight {
		return a.InFlight < b.InFlight
	}
	return a.ID < b.ID
}
