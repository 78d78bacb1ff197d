-- +goose Up
ALTER TABLE users ADD COLUMN terms_accepted_at TIMESTAMPTZ;
ALTER TABLE users ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';

-- Console sign-ins. Only a hash of the cookie's token is stored, so a database leak opens no session.
CREATE TABLE sessions (
    id           BIGSERIAL PRIMARY KEY,
    user_id      BIGINT      NOT NULL REFERENCES users (id),
    token_hash   TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    revoked_at   TIMESTAMPTZ,
    ip           TEXT        NOT NULL DEFAULT '',
    user_agent   TEXT        NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX sessions_token_hash ON sessions (token_hash);
CREATE INDEX sessions_user ON sessions (user_id);

-- Single-use links sent by e-mail (verification, password reset), stored hashed.
CREATE TABLE email_tokens (
    id         BIGSERIAL PRIMARY KEY,
    user_id    BIGINT      NOT NULL REFERENCES users (id),
    purpose    TEXT        NOT NULL CHECK (purpose IN ('verify', 'reset')),
    token_hash TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);
CREATE UNIQUE INDEX email_tokens_token_hash ON email_tokens (token_hash);
CREATE INDEX email_tokens_user ON email_tokens (user_id, purpose, created_at);

-- +goose Down
DROP TABLE email_tokens;
DROP TABLE sessions;
ALTER TABLE users DROP COLUMN time_zone;
ALTER TABLE users DROP COLUMN terms_accepted_at;
