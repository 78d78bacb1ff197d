package tasks

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
)

// Problem is one violated invariant, naming what it is about.
type Problem struct {
	AccountID    int64  // 0 when it is not about an account
	TaskID       string // "" when it is not about a task
	CredentialID string // "" when it is not about a credential
	What         string
}

func (p Problem) String() string {
	switch {
	case p.TaskID != "":
		return "task " + p.TaskID + ": " + p.What
	case p.CredentialID != "":
		return "credential " + p.CredentialID + ": " + p.What
	default:
		return fmt.Sprintf("account %d: %s", p.AccountID, p.What)
	}
}

// Audit checks, on one consistent snapshot, every invariant that ties money and tasks together
// (docs/design.md, "Money and the ledger" and "Tasks"):
//   - each account's available and reserved balances equal the sums of its ledger entries' deltas, its
//     newest entry records those balances, and reserved is never negative;
//   - only what Stripe gave back (a refund, a dispute) or a staff adjustment ever left available below
//     zero: no reservation and no other kind of entry did;
//   - each task has exactly the entries its billing state calls for — a reserve, then a settle or a
//     release once it ended — each moving the task's amount, and its billing state agrees with its
//     status;
//   - each account's waiting_tasks counts its tasks waiting for a credential, and each credential's
//     in_flight counts its unfinished tasks.
//
// It reads in aggregate (a handful of queries, whatever the size), so it can run in production as a
// self-check; the tests run it after every concurrency and crash scenario.
func Audit(ctx context.Context, d *db.DB) ([]Problem, error) {
	var opts []*sql.TxOptions
	if d.Postgres {
		opts = append(opts, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	}
	var out []Problem
	err := d.R.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, check := range []func(*gorm.DB) ([]Problem, error){balancesMatchEntries, lastEntryMatchesBalances, onlyGiveBacksGoNegative,
			taskEntriesMatchBillingState, billingStateMatchesStatus, backlogCounts, inFlightCounts} {
			found, err := check(tx)
			if err != nil {
				return err
			}
			out = append(out, found...)
		}
		return nil
	}, opts...)
	if err != nil {
		return out, fmt.Errorf("audit: %w", err)
	}
	return out, nil
}

func balancesMatchEntries(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID                        int64
		AvailableMicros, Reserved int64
		SumAvailable, SumReserved int64
	}
	err := tx.Raw(`SELECT a.id, a.available_micros, a.reserved_micros AS reserved,
			COALESCE(SUM(e.delta_available), 0) AS sum_available, COALESCE(SUM(e.delta_reserved), 0) AS sum_reserved
		FROM accounts a LEFT JOIN ledger_entries e ON e.account_id = a.id
		GROUP BY a.id, a.available_micros, a.reserved_micros
		HAVING a.available_micros <> COALESCE(SUM(e.delta_available), 0) OR a.reserved_micros <> COALESCE(SUM(e.delta_reserved), 0)
			OR a.reserved_micros < 0`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("balances against entries: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		if r.AvailableMicros != r.SumAvailable || r.Reserved != r.SumReserved {
			out = append(out, Problem{AccountID: r.ID, What: fmt.Sprintf("balances %d/%d but entries sum to %d/%d", r.AvailableMicros, r.Reserved, r.SumAvailable, r.SumReserved)})
		}
		if r.Reserved < 0 {
			out = append(out, Problem{AccountID: r.ID, What: fmt.Sprintf("reserved %d < 0", r.Reserved)})
		}
	}
	return out, nil
}

func lastEntryMatchesBalances(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID                              int64
		AvailableMicros, ReservedMicros int64
		AvailableAfter, ReservedAfter   int64
	}
	err := tx.Raw(`SELECT a.id, a.available_micros, a.reserved_micros, e.available_after, e.reserved_after
		FROM accounts a JOIN ledger_entries e ON e.id = (SELECT MAX(id) FROM ledger_entries WHERE account_id = a.id)
		WHERE e.available_after <> a.available_micros OR e.reserved_after <> a.reserved_micros`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("newest entries against balances: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		out = append(out, Problem{AccountID: r.ID, What: fmt.Sprintf("last entry says %d/%d after, account holds %d/%d",
			r.AvailableAfter, r.ReservedAfter, r.AvailableMicros, r.ReservedMicros)})
	}
	return out, nil
}

// onlyGiveBacksGoNegative finds entries that took available below zero, or lowered it while it was below,
// other than a refund, a dispute or a staff adjustment (docs/design.md §3).
func onlyGiveBacksGoNegative(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID, AccountID  int64
		Kind           string
		AvailableAfter int64
	}
	err := tx.Raw(`SELECT id, account_id, kind, available_after FROM ledger_entries
		WHERE available_after < 0 AND delta_available < 0 AND kind NOT IN ('refund', 'dispute', 'adjustment')`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("entries below zero: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		out = append(out, Problem{AccountID: r.AccountID, What: fmt.Sprintf("%s entry %d left available at %d", r.Kind, r.ID, r.AvailableAfter)})
	}
	return out, nil
}

func taskEntriesMatchBillingState(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID, Status, BillingState             string
		Entries, Reserves, Settles, Releases int
		WrongAmounts                         int
		OutOfOrder                           int
	}
	err := tx.Raw(`SELECT t.id, t.status, t.billing_state, COUNT(e.id) AS entries,
			COALESCE(SUM(CASE WHEN e.kind = 'reserve' THEN 1 ELSE 0 END), 0) AS reserves,
			COALESCE(SUM(CASE WHEN e.kind = 'settle' THEN 1 ELSE 0 END), 0) AS settles,
			COALESCE(SUM(CASE WHEN e.kind = 'release' THEN 1 ELSE 0 END), 0) AS releases,
			COALESCE(SUM(CASE WHEN e.delta_reserved <> t.amount_micros AND e.delta_reserved <> -t.amount_micros THEN 1 ELSE 0 END), 0) AS wrong_amounts,
			CASE WHEN MAX(CASE WHEN e.kind = 'reserve' THEN e.id END) > MIN(CASE WHEN e.kind <> 'reserve' THEN e.id END) THEN 1 ELSE 0 END AS out_of_order
		FROM tasks t LEFT JOIN ledger_entries e ON e.task_id = t.id
		GROUP BY t.id, t.status, t.billing_state, t.amount_micros
		HAVING NOT (
			(t.billing_state = 'reserved' AND COUNT(e.id) = 1 AND SUM(CASE WHEN e.kind = 'reserve' THEN 1 ELSE 0 END) = 1) OR
			(t.billing_state = 'settled' AND COUNT(e.id) = 2 AND SUM(CASE WHEN e.kind = 'reserve' THEN 1 ELSE 0 END) = 1 AND SUM(CASE WHEN e.kind = 'settle' THEN 1 ELSE 0 END) = 1) OR
			(t.billing_state = 'released' AND COUNT(e.id) = 2 AND SUM(CASE WHEN e.kind = 'reserve' THEN 1 ELSE 0 END) = 1 AND SUM(CASE WHEN e.kind = 'release' THEN 1 ELSE 0 END) = 1))
			OR SUM(CASE WHEN e.delta_reserved <> t.amount_micros AND e.delta_reserved <> -t.amount_micros THEN 1 ELSE 0 END) > 0
			OR MAX(CASE WHEN e.kind = 'reserve' THEN e.id END) > MIN(CASE WHEN e.kind <> 'reserve' THEN e.id END)`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("task entries against billing states: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		what := fmt.Sprintf("(%s, billing %s): %d entries — %d reserve, %d settle, %d release", r.Status, r.BillingState, r.Entries, r.Reserves, r.Settles, r.Releases)
		if r.WrongAmounts > 0 {
			what += fmt.Sprintf("; %d entries move another amount than the task's", r.WrongAmounts)
		}
		if r.OutOfOrder > 0 {
			what += "; the reservation is not the first entry"
		}
		out = append(out, Problem{TaskID: r.ID, What: what})
	}
	return out, nil
}

func billingStateMatchesStatus(tx *gorm.DB) ([]Problem, error) {
	var rows []struct{ ID, Status, BillingState string }
	err := tx.Raw(`SELECT id, status, billing_state FROM tasks
		WHERE (status = 'completed' AND billing_state <> 'settled') OR (status = 'failed' AND billing_state <> 'released')
			OR (status IN ('queued', 'in_progress') AND billing_state <> 'reserved')`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("billing states against statuses: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		out = append(out, Problem{TaskID: r.ID, What: fmt.Sprintf("status %s with billing %s", r.Status, r.BillingState)})
	}
	return out, nil
}

func backlogCounts(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID           int64
		WaitingTasks int
		Waiting      int
	}
	err := tx.Raw(`SELECT a.id, a.waiting_tasks, COUNT(t.id) AS waiting
		FROM accounts a LEFT JOIN tasks t ON t.account_id = a.id AND t.status = 'queued' AND t.credential_id IS NULL
		GROUP BY a.id, a.waiting_tasks HAVING a.waiting_tasks <> COUNT(t.id)`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("backlog counters: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		out = append(out, Problem{AccountID: r.ID, What: fmt.Sprintf("waiting_tasks %d, tasks waiting for a slot %d", r.WaitingTasks, r.Waiting)})
	}
	return out, nil
}

func inFlightCounts(tx *gorm.DB) ([]Problem, error) {
	var rows []struct {
		ID         string
		InFlight   int
		Unfinished int
	}
	err := tx.Raw(`SELECT c.id, c.in_flight, COUNT(t.id) AS unfinished
		FROM upstream_credentials c LEFT JOIN tasks t ON t.credential_id = c.id AND t.status IN ('queued', 'in_progress')
		GROUP BY c.id, c.in_flight HAVING c.in_flight <> COUNT(t.id)`).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("credential counters: %w", err)
	}
	var out []Problem
	for _, r := range rows {
		out = append(out, Problem{CredentialID: r.ID, What: fmt.Sprintf("in_flight %d, unfinished tasks %d", r.InFlight, r.Unfinished)})
	}
	return out, nil
}
