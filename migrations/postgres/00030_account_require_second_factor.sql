-- +goose Up
-- An owner can require two-step sign-in of every member of the account (docs/console.md, "Two-step
-- sign-in"): a member without it is sent to set it up before any other console page.
ALTER TABLE accounts ADD COLUMN require_second_factor BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE accounts DROP COLUMN require_second_factor;
