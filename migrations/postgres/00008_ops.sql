-- +goose Up
-- The staff overview and /metrics read 30 days of tasks and charges on every page view and scrape:
-- these keep those reads to the days they show, however large the tables grow (docs/support.md).
-- Tasks created per day.
CREATE INDEX tasks_created ON tasks (created_at);
-- Charges (settlements) per day; the overview's query names kind = 'settle' literally, so the partial
-- index is usable on both engines.
CREATE INDEX ledger_entries_settled ON ledger_entries (created_at) WHERE kind = 'settle';

-- +goose Down
DROP INDEX ledger_entries_settled;
DROP INDEX tasks_created;
