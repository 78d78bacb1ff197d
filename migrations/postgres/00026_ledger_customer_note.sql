-- +goose Up
-- What the customer reads of a balance adjustment (wallet credit --customer-note); the reason stays
-- with staff. '' shows "Adjustment by support" (docs/usage.md).
ALTER TABLE ledger_entries ADD COLUMN customer_note TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE ledger_entries DROP COLUMN customer_note;
