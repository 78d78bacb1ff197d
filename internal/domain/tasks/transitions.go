package tasks

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/billing"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/storetext"
	"videogen/internal/money"
	"videogen/models"
)

// Enqueue records a new task as queued, with its first log line, inside the create transaction (which
// also enters it into the backlog and reserves its price).
func (s *Store) Enqueue(tx *gorm.DB, t *models.Task, detail string) error {
	t.Status, t.BillingState = Queued, billing.Reserved
	if err := tx.Create(t).Error; err != nil {
		return fmt.Errorf("insert task: %w", err)
	}
	return logEvent(tx, t.ID, t.CreatedAt, "", Queued, detail)
}

// EnterBacklog counts a new task among its account's tasks waiting for an upstream slot, refusing with
// ErrBacklogFull past max. It is checked and counted in one guarded UPDATE, so it is exact under
// concurrency.
func (s *Store) EnterBacklog(tx *gorm.DB, accountID int64, max int) error {
	res := tx.Exec("UPDATE accounts SET waiting_tasks = waiting_tasks + 1 WHERE id = ? AND waiting_tasks < ?", accountID, max)
	if res.Error != nil {
		return fmt.Errorf("count task in backlog: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrBacklogFull
	}
	return nil
}

// leaveBacklog uncounts a task that stops waiting for an upstream slot (it got one, or it ended).
func leaveBacklog(tx *gorm.DB, accountID int64) error {
	if err := tx.Exec("UPDATE accounts SET waiting_tasks = waiting_tasks - 1 WHERE id = ? AND waiting_tasks > 0", accountID).Error; err != nil {
		return fmt.Errorf("leave backlog: %w", err)
	}
	return nil
}

// ReturnToQueue gives a task's slot back and puts it back among the tasks waiting for a credential,
// when its first and only submission certainly created nothing upstream (the key or the model was
// refused, or the submission was not sent): another credential may take it, with a new idempotency
// key. Its queue deadline stays as it was. It returns false when the task is no longer in that state.
func (s *Store) ReturnToQueue(ctx context.Context, t *models.Task, owner string, next time.Time, reason string) (bool, error) {
	now := s.Now()
	done := false
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE tasks SET credential_id = NULL, upstream_key = NULL, upstream_model = NULL, submit_attempts = 0,
			submitted_at = NULL, run_deadline = NULL, next_check_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE id = ? AND status = ? AND credential_id = ? AND upstream_task_id IS NULL AND submit_attempts = 1 AND lease_owner = ?`,
			next, now, t.ID, Queued, *t.CredentialID, owner)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		done = true
		if err := logEvent(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("returned to the queue: credential %s did not take it (%s); nothing was created upstream", *t.CredentialID, reason)); err != nil {
			return err
		}
		// It was admitted to the backlog at create; it only comes back to it.
		if err := tx.Exec("UPDATE accounts SET waiting_tasks = waiting_tasks + 1 WHERE id = ?", t.AccountID).Error; err != nil {
			return fmt.Errorf("return to backlog: %w", err)
		}
		return freeSlot(tx, t.CredentialID, now) // last: see lockOrder
	})
	if err != nil {
		return false, fmt.Errorf("return %s to the queue: %w", t.ID, err)
	}
	if done {
		t.CredentialID, t.UpstreamKey, t.UpstreamModel, t.SubmitAttempts = nil, nil, nil, 0
	}
	return done, nil
}

// RecordAttempt notes a repeated submission (same credential, same key) before it is made.
func (s *Store) RecordAttempt(ctx context.Context, t *models.Task, owner string) error {
	now := s.Now()
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE tasks SET submit_attempts = submit_attempts + 1, updated_at = ? WHERE id = ? AND status IN ? AND upstream_task_id IS NULL",
			now, t.ID, Unfinished)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errors.New("task is no longer waiting for submission")
		}
		t.SubmitAttempts++
		return logEvent(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("submission attempt %d on upstream credential %s, same idempotency key %s (worker %s)",
			t.SubmitAttempts, *t.CredentialID, *t.UpstreamKey, owner))
	})
}

// MarkSubmitted stores the upstream's id of an accepted task and when to poll it, with its log line.
// With keepClaim the worker keeps its lease because the answer already says more (in progress, done,
// failed) and it acts on it now: let go earlier, and another worker could poll at the same time and log
// its steps twice. Submissions recorded at the same moment are written in one transaction (group).
func (s *Store) MarkSubmitted(ctx context.Context, t *models.Task, upstreamID string, nextCheck time.Time, keepClaim bool) error {
	m := &submitted{ctx: ctx, t: t, upstreamID: upstreamID, nextCheck: nextCheck, release: !keepClaim}
	s.submissions.do(m)
	if m.err != nil {
		return fmt.Errorf("record upstream id of %s: %w", t.ID, m.err)
	}
	t.UpstreamTaskID = &upstreamID
	return nil
}

// submitted is one MarkSubmitted in a batch.
type submitted struct {
	ctx        context.Context
	t          *models.Task
	upstreamID string
	nextCheck  time.Time
	release    bool
	err        error
}

// markSubmittedBatch writes a batch of MarkSubmitted in one transaction: the tasks in one UPDATE (each
// guarded on its status), then the log lines of those it changed in one INSERT. The batch's tasks are
// next checked at the latest time any of them asked for (they asked within moments of each other), so
// none is polled sooner than its caller wanted.
func (s *Store) markSubmittedBatch(batch []*submitted) {
	now := s.Now()
	order := slices.Clone(batch)
	slices.SortFunc(order, func(a, b *submitted) int { return strings.Compare(a.t.ID, b.t.ID) })
	next := order[0].nextCheck
	rows := make([]string, len(order))
	var args []any
	byID := make(map[string]*submitted, len(order))
	for i, m := range order {
		next = later(next, m.nextCheck)
		rows[i] = "(?, ?, CAST(? AS INTEGER))"
		release := 0
		if m.release {
			release = 1
		}
		args = append(args, m.t.ID, m.upstreamID, release)
		byID[m.t.ID] = m
	}
	args = append([]any{next, now}, args...)
	args = append(args, Unfinished)
	err := s.db.Tx(context.WithoutCancel(batch[0].ctx), func(tx *gorm.DB) error {
		var changed []string
		if err := tx.Raw(`UPDATE tasks SET upstream_task_id = v.column2, poll_count = 0, next_check_at = ?,
			lease_owner = CASE WHEN v.column3 = 1 THEN NULL ELSE lease_owner END, lease_until = CASE WHEN v.column3 = 1 THEN NULL ELSE lease_until END,
			updated_at = ? FROM (VALUES `+strings.Join(rows, ", ")+`) AS v WHERE tasks.id = v.column1 AND tasks.status IN ?
			RETURNING tasks.id`, args...).Scan(&changed).Error; err != nil {
			return err
		}
		if len(changed) == 0 {
			return nil
		}
		slices.Sort(changed)
		events := make([]models.TaskEvent, len(changed))
		for i, id := range changed {
			m := byID[id]
			events[i] = event(id, now, m.t.Status, m.t.Status, "accepted upstream as "+m.upstreamID)
		}
		if err := tx.Create(&events).Error; err != nil {
			return fmt.Errorf("task events: %w", err)
		}
		return nil
	})
	if err != nil && len(batch) > 1 {
		// One of them failed the batch: each alone, so that the others are still recorded.
		for _, m := range batch {
			s.markSubmittedBatch([]*submitted{m})
		}
		return
	}
	for _, m := range batch {
		m.err = err
	}
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// DeferSubmission releases the claim after a submission without a clear answer (timeout, 5xx, a busy
// credential), to be retried at next with the same credential and key.
func (s *Store) DeferSubmission(ctx context.Context, t *models.Task, owner string, next time.Time, reason string) error {
	now := s.Now()
	return s.db.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE tasks SET next_check_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND lease_owner = ?",
			next, now, t.ID, owner).Error; err != nil {
			return err
		}
		return logEvent(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("submission attempt %d: no clear answer (%s); will retry with the same key", t.SubmitAttempts, reason))
	})
}

// MarkInProgress moves a queued task to in_progress when the upstream reports it started.
func (s *Store) MarkInProgress(ctx context.Context, t *models.Task, progress int) error {
	now := s.Now()
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE tasks SET status = ?, progress = ?, updated_at = ? WHERE id = ? AND status IN ?", InProgress, progress, now, t.ID, movingTo(InProgress))
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return logEvent(tx, t.ID, now, Queued, InProgress, "generation started upstream")
	})
	if err != nil {
		return fmt.Errorf("mark %s in progress: %w", t.ID, err)
	}
	t.Status = InProgress
	return nil
}

// Reschedule releases the claim after a poll and sets the next one; progress is the upstream's.
func (s *Store) Reschedule(ctx context.Context, t *models.Task, owner string, next time.Time, progress int) error {
	err := s.db.W.WithContext(ctx).Exec(`UPDATE tasks SET next_check_at = ?, poll_count = poll_count + 1, progress = ?,
		lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND status IN ? AND lease_owner = ?`,
		next, progress, s.Now(), t.ID, Unfinished, owner).Error
	if err != nil {
		return fmt.Errorf("reschedule %s: %w", t.ID, err)
	}
	return nil
}

// HoldForStorage is Reschedule for a task the provider has finished whose output could not be stored
// because the storage is down: its run deadline moves to at least deadline, so that an outage of the
// storage, however long, delays the copy instead of failing the task (docs/operations.md, "When a
// dependency fails"). The provider's own retention of the output still bounds the wait: once it has
// deleted the file, the download fails and the task ends at its deadline like any other.
func (s *Store) HoldForStorage(ctx context.Context, t *models.Task, owner string, next, deadline time.Time) error {
	err := s.db.W.WithContext(ctx).Exec(`UPDATE tasks SET next_check_at = ?, poll_count = poll_count + 1,
		run_deadline = CASE WHEN run_deadline IS NULL OR run_deadline < ? THEN ? ELSE run_deadline END,
		lease_owner = NULL, lease_until = NULL, updated_at = ? WHERE id = ? AND status IN ? AND lease_owner = ?`,
		next, deadline, deadline, s.Now(), t.ID, Unfinished, owner).Error
	if err != nil {
		return fmt.Errorf("hold %s for the storage: %w", t.ID, err)
	}
	return nil
}

// Output is a finished task's video as stored, and the stills stored beside it ("" when none).
type Output struct {
	Key                          string
	Size                         int64
	ThumbnailKey, SpritesheetKey string
	// The last frame as the provider returned it, and its image type (empty: none).
	LastFrameKey, LastFrameType string
	// What the provider reports it rendered, and the size the route's model renders for the size sold
	// (its table's pixels, or the operator's size_map): a rendered size is compared with this.
	Rendered     Rendered
	ExpectedSize string
}

// Rendered is what the provider reports it rendered for a task (docs/upstreams.md#rendered); zero
// fields were not reported.
type Rendered struct {
	Seed       *int64
	Size       string
	Resolution string
	Ratio      string
	Seconds    float64
	FPS        int
}

// Keys lists the stored files of the output: the video and each still stored.
func (o Output) Keys() []string {
	keys := []string{o.Key}
	for _, k := range []string{o.ThumbnailKey, o.SpritesheetKey, o.LastFrameKey} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// Complete marks the task completed with its stored output and, in the same transaction, charges its
// reservation and frees its credential slot. won is false when the task had already ended (a deadline):
// then nothing changes and the caller deletes its copy. Completions arriving at the same moment are
// written in one transaction (group), each exactly as it would be alone.
func (s *Store) Complete(ctx context.Context, t *models.Task, out Output, expires time.Time, cost Cost) (won bool, err error) {
	c := &completion{ctx: ctx, t: t, out: out, expires: expires, cost: cost}
	s.completions.do(c)
	if c.err != nil {
		return false, fmt.Errorf("complete %s: %w", t.ID, c.err)
	}
	if c.won {
		t.Status, t.BillingState, t.Progress, t.OutputKey = Completed, billing.Settled, 100, &out.Key
		t.ThumbnailKey, t.SpritesheetKey = nullable(out.ThumbnailKey), nullable(out.SpritesheetKey)
		t.LastFrameKey, t.LastFrameType = nullable(out.LastFrameKey), nullable(out.LastFrameType)
		r := out.Rendered
		t.RenderedSeed, t.RenderedSize, t.RenderedResolution, t.RenderedRatio = r.Seed, nullable(r.Size), nullable(r.Resolution), nullable(r.Ratio)
		if r.Seconds != 0 {
			t.RenderedSeconds = &r.Seconds
		}
		if r.FPS != 0 {
			t.RenderedFPS = &r.FPS
		}
	}
	return c.won, nil
}

// completion is one Complete in a batch.
type completion struct {
	ctx     context.Context
	t       *models.Task
	out     Output
	expires time.Time
	cost    Cost
	won     bool
	err     error
}

// completeBatch writes a batch of completions in one transaction, in the package's lock order
// (lockOrder): every task first (in id order), guarded on an unfinished status and a reserved
// reservation; then, for those it moved, their webhook events and log lines (one INSERT); then the
// charges (billing.SettleMany: one entry each, each account's balance moved once, in id order); last
// each credential's slots, freed once for the batch. If the transaction fails, each completion is
// written alone, so that one failure does not fail the others.
func (s *Store) completeBatch(batch []*completion) {
	won, err := s.completeTx(batch)
	if err != nil && len(batch) > 1 {
		for _, c := range batch {
			s.completeBatch([]*completion{c})
		}
		return
	}
	for i, c := range batch {
		c.won, c.err = err == nil && won[i], err
	}
}

func (s *Store) completeTx(batch []*completion) ([]bool, error) {
	now := s.Now()
	won := make([]bool, len(batch))
	idx := make([]int, len(batch))
	for i := range idx {
		idx[i] = i
	}
	err := s.db.Tx(context.WithoutCancel(batch[0].ctx), func(tx *gorm.DB) error {
		slices.SortFunc(idx, func(a, b int) int { return strings.Compare(batch[a].t.ID, batch[b].t.ID) })
		for _, i := range idx {
			c := batch[i]
			t, out, r := c.t, c.out, c.out.Rendered
			res := tx.Exec(`UPDATE tasks SET status = ?, billing_state = ?, progress = 100, completed_at = ?, expires_at = ?, output_key = ?,
				output_bytes = ?, thumbnail_key = ?, spritesheet_key = ?, last_frame_key = ?, last_frame_type = ?,
				usage_completion_tokens = ?, usage_total_tokens = ?, upstream_cost_micros = ?,
				rendered_seed = ?, rendered_size = ?, rendered_resolution = ?, rendered_ratio = ?, rendered_seconds = ?, rendered_fps = ?,
				lease_owner = NULL, lease_until = NULL, updated_at = ?
				WHERE id = ? AND status IN ? AND billing_state = ?`,
				Completed, billing.Settled, now, c.expires, out.Key, out.Size, nullable(out.ThumbnailKey), nullable(out.SpritesheetKey),
				nullable(out.LastFrameKey), nullable(out.LastFrameType),
				c.cost.CompletionTokens, c.cost.TotalTokens, c.cost.column(),
				r.Seed, nullable(r.Size), nullable(r.Resolution), nullable(r.Ratio), nonZero(r.Seconds), nonZero(r.FPS),
				now, t.ID, movingTo(Completed), billing.Reserved)
			if res.Error != nil {
				return res.Error
			}
			won[i] = res.RowsAffected > 0
		}
		// What locks no account or credential first (task log, webhook events), so that those rows stay
		// locked for as short a time as they can.
		var events []models.TaskEvent
		var ended []*models.Task
		for _, i := range idx {
			if !won[i] {
				continue
			}
			c := batch[i]
			t := c.t
			events = append(events, event(t.ID, now, t.Status, Completed, fmt.Sprintf("output copied (%d bytes); %s charged; upstream cost %s",
				c.out.Size, money.Micros(t.AmountMicros).USD(), c.cost.text())))
			if note := renderedDiffers(t, c.out.Rendered, c.out.ExpectedSize); note != "" {
				events = append(events, event(t.ID, now, Completed, Completed, note))
			}
			ended = append(ended, t)
		}
		if len(events) == 0 {
			return nil
		}
		if err := s.tasksEnded(tx, ended, now); err != nil {
			return err
		}
		if err := tx.Create(&events).Error; err != nil {
			return fmt.Errorf("task events: %w", err)
		}
		// Then the charges, the accounts in id order (lockOrder).
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(batch[a].t.AccountID, batch[b].t.AccountID) })
		freed := map[string]int64{}
		var charges []billing.Charge
		for _, i := range idx {
			if !won[i] {
				continue
			}
			t := batch[i].t
			charges = append(charges, billing.Charge{AccountID: t.AccountID, TaskID: t.ID, Amount: money.Micros(t.AmountMicros)})
			if t.CredentialID != nil {
				freed[*t.CredentialID]++
			}
		}
		if err := billing.SettleMany(tx, charges, now); err != nil {
			return err
		}
		return freeSlots(tx, freed, now) // last: see lockOrder
	})
	return won, err
}

// renderedDiffers says, for staff, where the provider reports having rendered another size, ratio or
// duration than the one sold ("" when it does not, or did not say).
func renderedDiffers(t *models.Task, r Rendered, expected string) string {
	var diffs []string
	if expected == "" {
		expected = t.Size
	}
	switch {
	case r.Size == "" || r.Size == t.Size:
	case r.Size == expected:
		// The route's size_map, or the model's own pixels for the size sold (Seedance 1.0: 1920x1088).
		diffs = append(diffs, fmt.Sprintf("size %s (sold %s, as its route renders it)", r.Size, t.Size))
	case expected != t.Size:
		diffs = append(diffs, fmt.Sprintf("size %s (sold %s, its route renders %s)", r.Size, t.Size, expected))
	default:
		diffs = append(diffs, fmt.Sprintf("size %s (sold %s)", r.Size, t.Size))
	}
	if r.Ratio != "" && t.AspectRatio != "" && r.Ratio != t.AspectRatio {
		diffs = append(diffs, fmt.Sprintf("ratio %s (sold %s)", r.Ratio, t.AspectRatio))
	}
	if r.Seconds != 0 && math.Abs(r.Seconds-float64(t.Seconds)) >= 0.5 {
		diffs = append(diffs, fmt.Sprintf("%g seconds (sold %d)", r.Seconds, t.Seconds))
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the provider reports it rendered " + strings.Join(diffs, ", ")
}

// nonZero is v, or NULL when it is zero (not reported).
func nonZero[T int | float64](v T) any {
	if v == 0 {
		return nil
	}
	return v
}

// Cost is what a completed task cost upstream: the usage the provider reported (nil when it reports
// none) and the cost at the operator's price for the credential and model (docs/upstreams.md#cost).
type Cost struct {
	CompletionTokens *int64
	TotalTokens      *int64
	Micros           *money.Micros // nil: no price configured, so unknown
}

// column is the upstream_cost_micros value: NULL when unknown.
func (c Cost) column() any {
	if c.Micros == nil {
		return nil
	}
	return int64(*c.Micros)
}

func (c Cost) text() string {
	s := "unknown (no price configured)"
	if c.Micros != nil {
		s = c.Micros.String()
	}
	if c.CompletionTokens != nil {
		s += fmt.Sprintf(" (%d tokens)", *c.CompletionTokens)
	}
	return s
}

// Fail ends the task as failed, refunds its reservation in full, frees its slot or its place in the
// backlog — at most once: only the first ending of a task counts.
func (s *Store) Fail(ctx context.Context, t *models.Task, code, message string) error {
	_, err := s.failTx(ctx, t, code, message, nil, nil)
	return err
}

// failTx is Fail's transaction, shared by every way a task fails (a customer's cancel too), so that
// whatever a failure does happens for each. check, when set, looks at the locked row before anything
// changes: an error from it rolls everything back and is returned as it is. after, when set, runs in the
// same transaction once the task has failed here. won is false when the task had already ended.
func (s *Store) failTx(ctx context.Context, t *models.Task, code, message string, check, after func(tx *gorm.DB, cur *models.Task) error) (won bool, err error) {
	now := s.Now()
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		// Read under a row lock: another instance may be assigning the task a credential right now, and the
		// slot it takes must be freed with the row we fail (SQLite's single writer serialises this anyway).
		q := tx
		if s.db.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var cur models.Task
		if err := q.Where("id = ?", t.ID).Take(&cur).Error; err != nil {
			return err
		}
		if check != nil {
			if err := check(tx, &cur); err != nil {
				return err
			}
		}
		if !CanMove(cur.Status, Failed) {
			return nil // it already ended: only the first ending counts
		}
		res := tx.Exec(`UPDATE tasks SET status = ?, billing_state = ?, error_code = ?, error_message = ?, lease_owner = NULL, lease_until = NULL,
			updated_at = ? WHERE id = ? AND status = ? AND billing_state = ?`, Failed, billing.Released, code, message, now, t.ID, cur.Status, billing.Reserved)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil
		}
		won = true
		if after != nil {
			if err := after(tx, &cur); err != nil {
				return err
			}
		}
		if err := billing.Release(tx, cur.AccountID, cur.ID, money.Micros(cur.AmountMicros), code, now); err != nil {
			return err
		}
		if cur.Status == Queued && cur.CredentialID == nil {
			if err := leaveBacklog(tx, cur.AccountID); err != nil {
				return err
			}
		}
		if err := s.taskEnded(tx, &cur, false, now); err != nil {
			return err
		}
		if err := logEvent(tx, t.ID, now, cur.Status, Failed, code+": "+message); err != nil {
			return err
		}
		return freeSlot(tx, cur.CredentialID, now) // last: see lockOrder
	})
	if err != nil {
		return false, fmt.Errorf("fail %s: %w", t.ID, err)
	}
	return won, nil
}

// NoteLateCompletion logs an upstream completion for a task that had already ended here (its deadline
// passed): the result is ignored and the customer keeps the refund.
func (s *Store) NoteLateCompletion(ctx context.Context, taskID string) error {
	var cur models.Task
	if err := s.db.R.WithContext(ctx).Select("status").Where("id = ?", taskID).Take(&cur).Error; err != nil {
		return fmt.Errorf("read %s: %w", taskID, err)
	}
	return logEvent(s.db.W.WithContext(ctx), taskID, s.Now(), cur.Status, cur.Status, "upstream reported completion after the task had ended; ignored")
}

// Note adds a line to a task's log without changing it: what the upstream said, for staff (customers
// see it in plain words, views.eventDetail).
func (s *Store) Note(ctx context.Context, t *models.Task, detail string) error {
	if err := logEvent(s.db.W.WithContext(ctx), t.ID, s.Now(), t.Status, t.Status, detail); err != nil {
		return fmt.Errorf("note on %s: %w", t.ID, err)
	}
	return nil
}

// ForgetOutput records that a task's stored video and its stills were deleted (their retention ended),
// if the task still names that copy.
func (s *Store) ForgetOutput(ctx context.Context, taskID, key string) error {
	if err := s.db.W.WithContext(ctx).Exec(`UPDATE tasks SET output_key = NULL, thumbnail_key = NULL, spritesheet_key = NULL,
		last_frame_key = NULL WHERE id = ? AND output_key = ?`, taskID, key).Error; err != nil {
		return fmt.Errorf("forget the output of %s: %w", taskID, err)
	}
	return nil
}

// Why MarkDeleted refuses.
var (
	// ErrNoTask: the account has no such task, or it was already deleted — the API answers both like an
	// unknown id.
	ErrNoTask = errors.New("no such task")
	// ErrUnfinished: the task is still queued or in progress. Its generation may already be paid for
	// upstream and this version cancels nothing there, so it cannot be deleted before it ends.
	ErrUnfinished = errors.New("the task has not finished")
)

// MarkDeleted records that the account's customer deleted a finished task (by names who, for the log):
// from this commit the API answers for it as for an unknown id. In the same transaction it forgets the
// task's stored video and stills, so no row names the files any more: the caller deletes the returned keys
// (none when nothing is stored), and if it never gets to — a crash, a storage error — the orphan sweep deletes the file
// as it does every file no row names. Forgetting the key after deleting the file instead would leave,
// after such a crash, a deleted task whose row still names a file nothing would ever remove. The ledger
// is not touched: a deleted video was still made, and stays charged.
func (s *Store) MarkDeleted(ctx context.Context, accountID int64, id, by string) (keys []string, err error) {
	now := s.Now()
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		q := tx
		if s.db.Postgres {
			// Two deletes of one task at once: the second waits here, then sees it deleted.
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var cur models.Task
		err := q.Select("id", "status", "output_key", "thumbnail_key", "spritesheet_key", "last_frame_key", "deleted_at").Where("id = ? AND account_id = ?", id, accountID).Take(&cur).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			return ErrNoTask
		case err != nil:
			return err
		case cur.DeletedAt != nil:
			return ErrNoTask
		case !Terminal(cur.Status):
			return ErrUnfinished
		}
		res := tx.Exec("UPDATE tasks SET deleted_at = ?, output_key = NULL, thumbnail_key = NULL, spritesheet_key = NULL, last_frame_key = NULL, updated_at = ? WHERE id = ? AND deleted_at IS NULL AND status IN ?",
			now, now, id, []string{Completed, Failed})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNoTask // deleted meanwhile (SQLite serialises writers, so only a racing delete gets here)
		}
		detail := "deleted through the API by " + by + "; no stored video to remove"
		if cur.OutputKey != nil {
			keys = StoredKeys(&cur)
			detail = "deleted through the API by " + by + "; its stored video " + *cur.OutputKey + " is removed"
		}
		return logEvent(tx, id, now, cur.Status, cur.Status, detail)
	})
	if errors.Is(err, ErrNoTask) || errors.Is(err, ErrUnfinished) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("delete %s: %w", id, err)
	}
	return keys, nil
}

// StoredKeys lists the files a task's row names: its video and the stills beside it.
func StoredKeys(t *models.Task) []string {
	var keys []string
	for _, k := range []*string{t.OutputKey, t.ThumbnailKey, t.SpritesheetKey, t.LastFrameKey} {
		if k != nil {
			keys = append(keys, *k)
		}
	}
	return keys
}

// nullable stores "" as NULL.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// lockOrder: every transaction of this package that writes more than one of them locks a task first,
// then accounts, then credentials (in id order when several), so that two transactions never wait on
// each other. A credential's row is the hottest — every task of the credential, on every instance,
// writes it twice — so it comes last, just before the commit, and stays locked only that long.
//
// freeSlot gives the task's credential slot back; it is the last write of its transaction (lockOrder).
func freeSlot(tx *gorm.DB, credID *string, now time.Time) error {
	if credID == nil {
		return nil
	}
	return freeSlots(tx, map[string]int64{*credID: 1}, now)
}

// freeSlots gives back n slots of each credential, in id order (lockOrder).
func freeSlots(tx *gorm.DB, n map[string]int64, now time.Time) error {
	for _, id := range slices.Sorted(maps.Keys(n)) {
		if err := tx.Exec("UPDATE upstream_credentials SET in_flight = CASE WHEN in_flight > ? THEN in_flight - ? ELSE 0 END, updated_at = ? WHERE id = ?",
			n[id], n[id], now, id).Error; err != nil {
			return fmt.Errorf("free the slots on %s: %w", id, err)
		}
	}
	return nil
}

// logEvent writes one line of a task's log.
func logEvent(tx *gorm.DB, taskID string, at time.Time, from, to, detail string) error {
	e := event(taskID, at, from, to, detail)
	if err := tx.Create(&e).Error; err != nil {
		return fmt.Errorf("task event: %w", err)
	}
	return nil
}

// event is one line of a task's log. Details come partly from upstreams, so they are made safe to store.
func event(taskID string, at time.Time, from, to, detail string) models.TaskEvent {
	detail, _ = storetext.Clip(detail, 2000)
	return models.TaskEvent{TaskID: taskID, At: at, FromStatus: from, ToStatus: to, Detail: detail}
}

// EchoWhatIsSent makes the task's video object say what its route sends (docs/upstreams.md#rendered): a
// seed the route's provider takes none of is forgotten (the object's seed reads null), and a model that
// renders sound whatever is asked echoes generate_audio true; the task log says why.
func (s *Store) EchoWhatIsSent(ctx context.Context, t *models.Task, dropSeed, soundAlways bool, detail string) error {
	if !dropSeed && !(soundAlways && !t.GenerateAudio) {
		return nil
	}
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		set := map[string]any{}
		if dropSeed {
			set["seed"] = nil
		}
		if soundAlways {
			set["generate_audio"] = true
		}
		// Only while the task runs: a task cancelled or finished meanwhile keeps what its last event said.
		res := tx.Model(&models.Task{}).Where("id = ? AND status IN ?", t.ID, Unfinished).Updates(set)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		return logEvent(tx, t.ID, s.Now(), t.Status, t.Status, detail)
	})
	if err != nil {
		return fmt.Errorf("echo what is sent for %s: %w", t.ID, err)
	}
	if dropSeed {
		t.Seed = nil
	}
	if soundAlways {
		t.GenerateAudio = true
	}
	return nil
}

// SubmitAgain sends a task that failed upstream once more on the same route, under a new idempotency
// key, when the provider calls its failure passing (Veo's audio filter: docs/upstreams.md#gemini): it
// is waiting for submission again, due at next, and may be retried so only once. Its run deadline stays:
// RUN_TIMEOUT bounds the customer's wait from the first submission. It returns false when the task is
// no longer in that upstream task, was retried already, or its lease passed to another worker.
func (s *Store) SubmitAgain(ctx context.Context, t *models.Task, owner string, next time.Time, reason string) (bool, error) {
	now := s.Now()
	key := ids.NewUpstreamIdempotencyKey()
	done := false
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE tasks SET upstream_task_id = NULL, upstream_key = ?, submit_attempts = 0, upstream_retries = upstream_retries + 1,
			progress = 0, next_check_at = ?, lease_owner = NULL, lease_until = NULL, updated_at = ?
			WHERE id = ? AND status IN ? AND upstream_task_id = ? AND upstream_retries = 0 AND lease_owner = ?`,
			key, next, now, t.ID, Unfinished, deref(t.UpstreamTaskID), owner)
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		done = true
		return logEvent(tx, t.ID, now, t.Status, t.Status, fmt.Sprintf("%s; submitting once more on upstream credential %s (worker %s)", reason, deref(t.CredentialID), owner))
	})
	if err != nil {
		return false, fmt.Errorf("submit %s again: %w", t.ID, err)
	}
	if done {
		t.UpstreamTaskID, t.UpstreamKey, t.SubmitAttempts, t.UpstreamRetries = nil, &key, 0, t.UpstreamRetries+1
	}
	return done, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
