-- +goose Up
-- Who asked for a password reset: the client's address and, when its browser held a valid device
-- cookie, the user it names and the password epoch it was given under (never the cookie itself). The
-- job that handles the request spends the address's own recovery budget only for a client the account
-- knows, and a budget of strangers' requests for every other (docs/decisions.md, "Account-recovery mail
-- has a budget of its own"). Rows still live for seconds.
ALTER TABLE reset_requests ADD COLUMN client_ip TEXT NOT NULL DEFAULT '';
ALTER TABLE reset_requests ADD COLUMN device_user_id BIGINT;
ALTER TABLE reset_requests ADD COLUMN device_epoch TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE reset_requests DROP COLUMN device_epoch;
ALTER TABLE reset_requests DROP COLUMN device_user_id;
ALTER TABLE reset_requests DROP COLUMN client_ip;
