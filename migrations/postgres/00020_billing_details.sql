-- +goose Up
-- The billing details an account enters for its monthly statements (docs/usage.md): the name and the
-- postal address (several lines) to print, and a tax id such as a VAT number. '' means not given.
ALTER TABLE accounts ADD COLUMN billing_name TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN billing_address TEXT NOT NULL DEFAULT '';
ALTER TABLE accounts ADD COLUMN billing_tax_id TEXT NOT NULL DEFAULT '';
-- A statement cuts an account's ledger at the last entry before each month's first instant
-- (MAX(id) WHERE created_at < …); the (account_id, id) index serves its sums and this one its cuts.
CREATE INDEX ledger_entries_account_created ON ledger_entries (account_id, created_at, id);

-- +goose Down
DROP INDEX ledger_entries_account_created;
ALTER TABLE accounts DROP COLUMN billing_tax_id;
ALTER TABLE accounts DROP COLUMN billing_address;
ALTER TABLE accounts DROP COLUMN billing_name;
