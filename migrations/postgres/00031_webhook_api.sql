-- +goose Up
-- Webhook endpoints managed through OpenAI's webhook-endpoints API (docs/webhooks.md, "The API"): an
-- endpoint has a name, and a key needs the webhooks:write scope to manage them (api_keys.scopes, a
-- space-separated list; '' = videos and uploads only, as every key before).
ALTER TABLE webhook_endpoints ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN scopes;
ALTER TABLE webhook_endpoints DROP COLUMN name;
