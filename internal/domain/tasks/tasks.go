// Package tasks owns a video task's life. It holds the statuses and the transitions allowed between them,
// and it is the only code that writes the tasks table, the task log (task_events), an account's backlog
// counter (waiting_tasks) and a credential's in_flight counter: each transition is one method, guarded
// by the state it leaves in its WHERE clause and writing its log line in the same transaction, so it
// happens once however many instances attempt it. The worker decides when; this package decides what may
// happen. Money moves through billing, inside the same transactions.
package tasks

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/models"
)

// Statuses of a task (the four of docs/api.md; docs/design.md §5).
const (
	Queued     = "queued"
	InProgress = "in_progress"
	Completed  = "completed"
	Failed     = "failed"
)

// next lists the statuses each status may move to. Completed and failed are terminal; a queued task may
// end at once (a failed submission, a deadline, or one poll that sees the video done).
var next = map[string][]string{
	Queued:     {InProgress, Completed, Failed},
	InProgress: {Completed, Failed},
}

// CanMove reports whether a task may go from one status to another.
func CanMove(from, to string) bool {
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// movingTo lists the statuses a task may leave for to: the guard of that transition's UPDATE, taken from
// the table above so that the table is the only statement of what may happen.
func movingTo(to string) []string {
	var out []string
	for _, from := range []string{Queued, InProgress, Completed, Failed} {
		if CanMove(from, to) {
			out = append(out, from)
		}
	}
	return out
}

// Terminal reports whether a status can never change again.
func Terminal(status string) bool { return len(next[status]) == 0 }

// Unfinished lists the statuses a task can still leave, for queries.
var Unfinished = []string{Queued, InProgress}

// ErrBacklogFull is returned by EnterBacklog when the account already has its maximum of tasks waiting
// for an upstream slot.
var ErrBacklogFull = errors.New("the account's backlog is full")

// Store writes tasks. Its clock stamps every time it stores.
type Store struct {
	db     *db.DB
	now    func() time.Time
	events Events

	submissions *group[submitted]  // MarkSubmitted, group-committed
	completions *group[completion] // Complete, group-committed
}

// Events is told of tasks' terminal transitions inside their transaction — the webhooks
// (internal/domain/webhooks), which write the event and its deliveries' jobs there, so they exist if and
// only if the ending commits. Task i ended of accountIDs[i]; one call holds endings of one kind.
type Events interface {
	TasksEnded(tx *gorm.DB, accountIDs []int64, videoIDs []string, completed bool, at time.Time) error
}

// tasksEnded tells the events of several completions, inside their transaction.
func (s *Store) tasksEnded(tx *gorm.DB, ended []*models.Task, at time.Time) error {
	if s.events == nil || len(ended) == 0 {
		return nil
	}
	accts := make([]int64, len(ended))
	ids := make([]string, len(ended))
	for i, t := range ended {
		accts[i], ids[i] = t.AccountID, t.ID
	}
	if err := s.events.TasksEnded(tx, accts, ids, true, at); err != nil {
		return fmt.Errorf("record the events of %d completions: %w", len(ended), err)
	}
	return nil
}

// TellEvents has every later terminal transition told to e. The assembly calls it once, before anything
// runs.
func (s *Store) TellEvents(e Events) { s.events = e }

// taskEnded tells the events of an ending, inside its transaction.
func (s *Store) taskEnded(tx *gorm.DB, t *models.Task, completed bool, at time.Time) error {
	if s.events == nil {
		return nil
	}
	if err := s.events.TasksEnded(tx, []int64{t.AccountID}, []string{t.ID}, completed, at); err != nil {
		return fmt.Errorf("record the event of %s: %w", t.ID, err)
	}
	return nil
}

// NewStore returns the task store on d; now is the clock.
func NewStore(d *db.DB, now func() time.Time) *Store {
	s := &Store{db: d, now: now}
	s.submissions = newGroup(groupMax, groupWriters, s.markSubmittedBatch)
	s.completions = newGroup(groupMax, groupWriters, s.completeBatch)
	return s
}

// A group-committed batch holds up to groupMax transitions: enough to take whatever arrives while the
// previous batches commit under load, few enough that its transaction stays short. groupWriters batches
// are written at once, so that one batch's round trips to the database do not hold up the next.
const (
	groupMax     = 64
	groupWriters = 4
)

// Now is the store's clock, as the database keeps times (UTC, microseconds).
func (s *Store) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }
