package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/models"
)

// A customer's cancel (DELETE /v1/videos/{id} of an unfinished task, the console's Cancel button;
// docs/decisions.md, "Cancelling a video"). It depends on how far the task got:
//
//   - waiting for a credential: nothing exists upstream, so it fails here at once (StartCancel), in
//     Fail's transaction — a worker assigning it a slot at the same moment loses the assignment's guard;
//   - holding a credential without an upstream id: a submission is in flight or its outcome is unknown,
//     and the provider may be generating it; it cannot be stopped or refunded safely now (ErrSubmitting);
//   - accepted upstream: the cancel takes the task's lease as a worker would (no worker polls or
//     completes it meanwhile, a second cancel waits), the caller asks the provider, then FinishCancel
//     fails it as cancelled or AbandonCancel lets it go on. A crash in between leaves only a lease that
//     ends by itself.

// CodeCancelled is the error code of a task its customer cancelled.
const CodeCancelled = "cancelled"

// StateCancelled is the state a person reads for a task its customer cancelled (the console, the staff
// pages): the API reports it as status "failed" with error.code CodeCancelled, as OpenAI does
// (docs/console.md).
const StateCancelled = "cancelled"

// Why StartCancel does not end the task.
var (
	// ErrSubmitting: a submission of the task may be in flight, or its outcome is not known yet, so the
	// provider may be generating it under an id we do not have.
	ErrSubmitting = errors.New("the task is being submitted upstream")
	// ErrHeld: a worker (or another cancel) is working on the task right now; try again in a moment.
	ErrHeld = errors.New("the task is being worked on")
)

// errFinished and errUpstream stop StartCancel's failing transaction, changing nothing.
var (
	errFinished = errors.New("finished")
	errUpstream = errors.New("accepted upstream")
)

// Cancellation is where a customer's cancel stands after StartCancel.
type Cancellation struct {
	// Task as read under the row lock (ended when Cancelled).
	Task models.Task
	// Cancelled: the task had not reached a provider and has now failed as cancelled, released.
	Cancelled bool
	// Finished: the task had already ended; there is nothing to cancel.
	Finished bool
	// Owner, when set, is the lease the cancel holds on a task accepted upstream: ask its provider, then
	// call FinishCancel or AbandonCancel with it.
	Owner string
}

// StartCancel begins the cancel of one of the account's tasks (by names who asks, message is the task's
// error message should it end now). ErrNoTask: no such task for the account, or it was deleted.
func (s *Store) StartCancel(ctx context.Context, accountID int64, id, message string, lease time.Duration) (*Cancellation, error) {
	out := &Cancellation{}
	won, err := s.failTx(ctx, &models.Task{ID: id}, CodeCancelled, message, func(_ *gorm.DB, cur *models.Task) error {
		out.Task = *cur
		switch {
		case cur.AccountID != accountID || cur.DeletedAt != nil:
			return ErrNoTask
		case Terminal(cur.Status):
			return errFinished
		case cur.UpstreamTaskID != nil:
			return errUpstream
		case cur.CredentialID != nil:
			return ErrSubmitting
		}
		return nil // queued, no credential: nothing was sent anywhere
	}, nil)
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound) || errors.Is(err, ErrNoTask):
		return nil, ErrNoTask
	case errors.Is(err, ErrSubmitting):
		return nil, ErrSubmitting
	case errors.Is(err, errFinished):
		out.Finished = true
		return out, nil
	case errors.Is(err, errUpstream):
		return s.holdForCancel(ctx, out, lease)
	case err != nil:
		return nil, err
	case !won: // cannot happen: the check saw it unfinished under the lock
		return nil, ErrHeld
	}
	out.Cancelled = true
	return out, nil
}

// holdForCancel takes the lease of a task accepted upstream, if nobody holds it.
func (s *Store) holdForCancel(ctx context.Context, c *Cancellation, lease time.Duration) (*Cancellation, error) {
	now := s.Now()
	owner := "cancel-" + randomHex(8)
	res := s.db.W.WithContext(ctx).Exec(`UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE id = ? AND status IN ? AND deleted_at IS NULL
		AND upstream_task_id IS NOT NULL AND (lease_until IS NULL OR lease_until < ?)`, owner, now.Add(lease), c.Task.ID, Unfinished, now)
	if res.Error != nil {
		return nil, fmt.Errorf("hold %s for its cancel: %w", c.Task.ID, res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, ErrHeld // leased, or it ended meanwhile: the caller looks again
	}
	c.Owner = owner
	return c, nil
}

// FinishCancel fails a task whose provider has stopped it (or no longer has it), as cancelled, with
// its reservation released and the upstream outcome recorded (tasks.upstream_cancel "cancelled": the
// margin report counts it among the tasks ended here, with nothing to pay), in Fail's transaction.
// detail is the task log's line about the provider. won is false when the task had ended meanwhile.
func (s *Store) FinishCancel(ctx context.Context, t *models.Task, message, detail string) (won bool, err error) {
	return s.failTx(ctx, t, CodeCancelled, message, nil, func(tx *gorm.DB, cur *models.Task) error {
		if err := tx.Exec("UPDATE tasks SET upstream_cancel = ? WHERE id = ? AND upstream_cancel IS NULL", CancelDone, cur.ID).Error; err != nil {
			return fmt.Errorf("record the upstream cancel: %w", err)
		}
		return logEvent(tx, cur.ID, s.Now(), cur.Status, cur.Status, detail)
	})
}

// AbandonCancel gives back the lease of a cancel the provider refused or could not be asked, with a
// line in the task log; the task goes on as before.
func (s *Store) AbandonCancel(ctx context.Context, t *models.Task, owner, detail string) error {
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?", t.ID, owner)
		if res.Error != nil {
			return res.Error
		}
		return logEvent(tx, t.ID, s.Now(), t.Status, t.Status, detail)
	})
	if err != nil {
		return fmt.Errorf("give up the cancel of %s: %w", t.ID, err)
	}
	return nil
}

// Cancellable reports whether a customer may try to cancel the task now: unfinished, not deleted, and
// not in the middle of its submission.
func Cancellable(t *models.Task) bool {
	return !Terminal(t.Status) && t.DeletedAt == nil && (t.CredentialID == nil || t.UpstreamTaskID != nil)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
