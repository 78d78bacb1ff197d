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

-- PostgreSQL's migration also widens three indexes with INCLUDE columns, so sums over tasks and charges
-- read the index alone; SQLite has no INCLUDE, and its indexes stay as they are.

-- +goose Down
DROP INDEX users_account;
DROP INDEX tasks_account_unfinished;
