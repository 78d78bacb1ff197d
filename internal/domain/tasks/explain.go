package tasks

import (
	"fmt"
	"time"

	"videogen/internal/money"
	"videogen/models"
)

// Explain says in one sentence why the customer was or was not charged for a task, from the task and
// the ledger entries that name it — what support staff need to answer "my video failed and I was
// charged". It states what the ledger shows, so an inconsistency reads as one rather than being
// smoothed over.
func Explain(t models.Task, entries []models.LedgerEntry, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	amount := money.Micros(t.AmountMicros).USD()
	var reserve, settle, release *models.LedgerEntry
	for i := range entries {
		switch e := &entries[i]; e.Kind {
		case models.KindReserve:
			reserve = e
		case models.KindSettle:
			settle = e
		case models.KindRelease:
			release = e
		}
	}
	at := func(e *models.LedgerEntry) string { return e.CreatedAt.In(loc).Format("2006-01-02 15:04:05 MST") }
	why := ""
	if t.ErrorCode != nil {
		why = " (" + *t.ErrorCode + ")"
	}
	switch {
	case reserve == nil:
		return fmt.Sprintf("Not charged: no reservation was ever made for this task, so %s never left the balance — the ledger self-check should flag this task.", amount)
	case settle != nil && release != nil:
		return fmt.Sprintf("Inconsistent: the ledger both charged (%s) and released (%s) this task's %s — run `videogen ledger check` and escalate.", at(settle), at(release), amount)
	case settle != nil && t.Status == Completed:
		return fmt.Sprintf("Charged %s: the video completed and its reservation was settled at %s.", amount, at(settle))
	case settle != nil:
		return fmt.Sprintf("Charged %s although the task is %s: its reservation was settled at %s — this needs a refund by adjustment and an escalation.", amount, t.Status, at(settle))
	case release != nil && t.Status == Failed:
		return fmt.Sprintf("Not charged: the task failed%s and the %s reserved at creation was released back to the balance at %s.", why, amount, at(release))
	case release != nil:
		return fmt.Sprintf("Not charged: the %s reserved for this %s task was released at %s.", amount, t.Status, at(release))
	case t.Status == Failed || t.Status == Completed:
		return fmt.Sprintf("Not charged yet, but %s is still held: the task is %s while its %s reservation (%s) was neither settled nor released — the ledger self-check should flag it.", amount, t.Status, amount, at(reserve))
	default:
		return fmt.Sprintf("Not charged yet: %s has been reserved since %s while the video is made; it is charged only if the video completes and released otherwise.", amount, at(reserve))
	}
}
