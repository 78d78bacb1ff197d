-- +goose Up
-- The zone an account's calendar periods are counted in; the PostgreSQL migration explains the column.
ALTER TABLE accounts ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';
UPDATE accounts SET time_zone = COALESCE((SELECT u.time_zone FROM users u WHERE u.account_id = accounts.id ORDER BY u.id LIMIT 1), '');

-- +goose Down
ALTER TABLE accounts DROP COLUMN time_zone;
