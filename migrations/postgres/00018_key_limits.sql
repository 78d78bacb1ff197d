-- +goose Up
-- What an API key may spend and use (docs/api-keys.md). spend_limit_micros is a limit in micro-dollars per
-- limit_period ('day' or 'month', counted in the account's time zone, accounts.time_zone); NULL with
-- period '' is no limit, and the two are set together or not at all. allowed_models is the model ids the
-- key may create videos with, comma-separated as webhook_endpoints.events is: the list is tiny, read whole
-- with the key's row under the lock a create takes on it, and never searched by model; '' is every model.
ALTER TABLE api_keys ADD COLUMN spend_limit_micros BIGINT CHECK (spend_limit_micros > 0);
ALTER TABLE api_keys ADD COLUMN limit_period TEXT NOT NULL DEFAULT ''
    CHECK ((limit_period = '' AND spend_limit_micros IS NULL) OR (limit_period IN ('day', 'month') AND spend_limit_micros IS NOT NULL));
ALTER TABLE api_keys ADD COLUMN allowed_models TEXT NOT NULL DEFAULT '';
-- A key's spend in its period: the sum of its tasks' amounts created since the period began.
CREATE INDEX tasks_api_key_created ON tasks (api_key_id, created_at) WHERE api_key_id IS NOT NULL;

-- +goose Down
DROP INDEX tasks_api_key_created;
ALTER TABLE api_keys DROP COLUMN allowed_models;
ALTER TABLE api_keys DROP COLUMN limit_period;
ALTER TABLE api_keys DROP COLUMN spend_limit_micros;
