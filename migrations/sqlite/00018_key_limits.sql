-- +goose Up
-- What an API key may spend and use; the PostgreSQL migration explains the columns.
ALTER TABLE api_keys ADD COLUMN spend_limit_micros BIGINT CHECK (spend_limit_micros > 0);
ALTER TABLE api_keys ADD COLUMN limit_period TEXT NOT NULL DEFAULT ''
    CHECK ((limit_period = '' AND spend_limit_micros IS NULL) OR (limit_period IN ('day', 'month') AND spend_limit_micros IS NOT NULL));
ALTER TABLE api_keys ADD COLUMN allowed_models TEXT NOT NULL DEFAULT '';
CREATE INDEX tasks_api_key_created ON tasks (api_key_id, created_at) WHERE api_key_id IS NOT NULL;

-- +goose Down
DROP INDEX tasks_api_key_created;
ALTER TABLE api_keys DROP COLUMN allowed_models;
ALTER TABLE api_keys DROP COLUMN limit_period;
ALTER TABLE api_keys DROP COLUMN spend_limit_micros;
