-- +goose Up
-- The console's dashboard reads an account's settle entries of 30 days and whether it was ever funded
-- (see migrations/postgres/00023_dashboard.sql and docs/performance.md, step 7). SQLite has no INCLUDE:
-- the amount is a trailing key column, so the sum is read from the index alone all the same.
CREATE INDEX ledger_entries_account_settled ON ledger_entries (account_id, created_at, delta_reserved) WHERE kind = 'settle';
CREATE INDEX ledger_entries_account_funded ON ledger_entries (account_id, id) WHERE kind IN ('topup', 'test_topup', 'adjustment');

-- +goose Down
DROP INDEX ledger_entries_account_funded;
DROP INDEX ledger_entries_account_settled;
