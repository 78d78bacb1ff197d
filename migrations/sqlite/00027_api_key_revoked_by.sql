-- +goose Up
-- Who revoked a key, as the keys page says it: the member's e-mail, or "cli" for `videogen keys revoke`
-- ('' for keys revoked before this was kept).
ALTER TABLE api_keys ADD COLUMN revoked_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE api_keys DROP COLUMN revoked_by;
