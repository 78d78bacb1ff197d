-- +goose Up
-- The IANA zone an account's calendar periods are counted in: the day and month of a key's spend limit
-- and of the monthly statement (docs/decisions.md, "The account's time zone"). '' means UTC. An existing
-- account takes the display zone its first user chose, the nearest thing to its owner's intent.
ALTER TABLE accounts ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';
UPDATE accounts SET time_zone = COALESCE((SELECT u.time_zone FROM users u WHERE u.account_id = accounts.id ORDER BY u.id LIMIT 1), '');

-- +goose Down
ALTER TABLE accounts DROP COLUMN time_zone;
