-- +goose Up
-- The billing details an account prints on its statements; the PostgreSQL migration explains them.
ALTER TABLE accounts ADD COLUMN billing_name TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN billing_address TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN billing_tax_id TEXT NOT NULL DEFAULT '';
CREATE INDEX ledger_entries_account_created ON ledger_entries (account_id, created_at, id);

-- +goose Down
DROP INDEX ledger_entries_account_created;
ALTER TABLE accounts DROP COLUMN billing_tax_id;
ALTER TABLE accounts DROP COLUMN billing_address;
ALTER TABLE accounts DROP COLUMN billing_name;
