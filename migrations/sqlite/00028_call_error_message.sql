-- +goose Up
-- A refused call's message as its client read it (error.message), for the call's own page in the console
-- ('' for a call answered 2xx, and for calls logged before this was kept). Clipped to 500 bytes.
ALTER TABLE call_logs ADD COLUMN error_message TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE call_logs DROP COLUMN error_message;
