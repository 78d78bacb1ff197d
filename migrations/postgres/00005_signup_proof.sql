-- +goose Up
-- The hash of a random value the browser that signed up keeps in a cookie: confirming the address from
-- that browser (and only that one) signs the person in. Empty for every other link.
ALTER TABLE email_tokens ADD COLUMN signup_proof_hash TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE email_tokens DROP COLUMN signup_proof_hash;
