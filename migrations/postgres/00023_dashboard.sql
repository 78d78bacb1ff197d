-- +goose Up
-- The console's dashboard, at a million tasks (docs/performance.md, step 7). Its 30 days of charges read
-- ledger_entries_settled, the settle entries of every account by time, and dropped the other accounts'
-- rows one by one from the table (67,000 of them for the biggest account's 5,000: 39 ms); these are the
-- account's settle entries by time, with the amount, read from the index alone. Its "has this account
-- been funded" check walked the ledger in id order until a credit turned up (4 ms for an account whose
-- first credit came late); the credits of an account are a handful of entries. The queries name their
-- kinds literally, so the partial indexes serve them on either engine and in any plan. Building them
-- locks the ledger against writes for a few seconds on a ledger of millions of entries: run it in a quiet
-- hour, as 00022.
CREATE INDEX ledger_entries_account_settled ON ledger_entries (account_id, created_at) INCLUDE (delta_reserved) WHERE kind = 'settle';
CREATE INDEX ledger_entries_account_funded ON ledger_entries (account_id, id) WHERE kind IN ('topup', 'test_topup', 'adjustment');

-- +goose Down
DROP INDEX ledger_entries_account_funded;
DROP INDEX ledger_entries_account_settled;
