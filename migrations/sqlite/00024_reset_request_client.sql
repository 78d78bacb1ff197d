-- +goose Up
-- Who asked for a password reset (see migrations/postgres/00024_reset_request_client.sql).
ALTER TABLE reset_requests ADD COLUMN client_ip TEXT NOT NULL DEFAULT '';
ALTER TABLE reset_requests ADD COLUMN device_user_id INTEGER;
ALTER TABLE reset_requests ADD COLUMN device_epoch TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE reset_requests DROP COLUMN device_epoch;
ALTER TABLE reset_requests DROP COLUMN device_user_id;
ALTER TABLE reset_requests DROP COLUMN client_ip;
