-- +goose Up
-- The console's Tasks page filtered to queued or in-progress tasks ("what is running"): the account's
-- unfinished tasks, newest first. Without it the filter reads every task of the account (or, for the
-- biggest accounts, the whole table) to find the few still running: a quarter of a second at a million
-- tasks (docs/performance.md, "Figures that hold at a million tasks"). Only unfinished tasks are in it,
-- so it stays a few pages whatever the table's size; the list names status IN ('queued', 'in_progress')
-- literally, so the partial index is usable on both engines.
CREATE INDEX tasks_account_unfinished ON tasks (account_id, created_at DESC, id DESC) WHERE status IN ('queued', 'in_progress');

-- +goose Down
DROP INDEX tasks_account_unfinished;
