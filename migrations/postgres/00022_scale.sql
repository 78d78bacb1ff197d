-- +goose Up
-- The console's Tasks page filtered to queued or in-progress tasks ("what is running"): the account's
-- unfinished tasks, newest first. Without it the filter reads every task of the account (or, for the
-- biggest accounts, the whole table) to find the few still running: a quarter of a second at a million
-- tasks (docs/performance.md, "Figures that hold at a million tasks"). Only unfinished tasks are in it,
-- so it stays a few pages whatever the table's size; the list names status IN ('queued', 'in_progress')
-- literally, so the partial index is usable on both engines.
CREATE INDEX tasks_account_unfinished ON tasks (account_id, created_at DESC, id DESC) WHERE status IN ('queued', 'in_progress');

-- An account's users, removed members included: the staff pages name each tenant's owner and list its
-- members on every view (models.AccountWithOwner, AccountUsers), and the only index by account was the
-- partial one of current members, so each view read the whole users table.
CREATE INDEX users_account ON users (account_id, id);

-- Sums over an account's tasks by creation time — the usage report, each key's spend this day and month
-- on the keys page — read the columns they sum from the index itself (an index-only scan) instead of
-- one table row per task: the biggest account's month went from 78 ms to 6 ms, its year by model from
-- half a second to 30 ms. The key columns are unchanged (the lists page by them); the included ones ride
-- along in the leaf entries. PostgreSQL only: SQLite has no INCLUDE.
DROP INDEX tasks_account_created;
CREATE INDEX tasks_account_created ON tasks (account_id, created_at DESC, id DESC)
    INCLUDE (status, billing_state, seconds, amount_micros, model, api_key_id);
-- The staff overview's 30 days of every account (tasks per day and their outcome, charges per day), the
-- same way: from the index alone.
DROP INDEX tasks_created;
CREATE INDEX tasks_created ON tasks (created_at) INCLUDE (status);
DROP INDEX ledger_entries_settled;
CREATE INDEX ledger_entries_settled ON ledger_entries (created_at) INCLUDE (delta_reserved) WHERE kind = 'settle';

-- +goose Down
DROP INDEX ledger_entries_settled;
CREATE INDEX ledger_entries_settled ON ledger_entries (created_at) WHERE kind = 'settle';
DROP INDEX tasks_created;
CREATE INDEX tasks_created ON tasks (created_at);
DROP INDEX tasks_account_created;
CREATE INDEX tasks_account_created ON tasks (account_id, created_at DESC, id DESC);
DROP INDEX users_account;
DROP INDEX tasks_account_unfinished;
