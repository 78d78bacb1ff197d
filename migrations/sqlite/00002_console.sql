-- +goose Up
ALTER TABLE users ADD COLUMN terms_accepted_at DATETIME;
ALTER TABLE users ADD COLUMN time_zone TEXT NOT NULL DEFAULT '';

-- Console sign-ins. Only a hash of the cookie's token is stored, so a database leak opens no session.
CREATE TABLE sessions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      BIGINT      NOT NULL REFERENCES users (id),
    token_hash   TEXT        NOT NULL,
    created_at   DATETIME NOT NULL,
    last_seen_at DATETIME NOT NULL,
    expires_at   DATETIME NOT NULL,
    revoked_at   DATETIME,
    ip           TEXT        NOT NULL DEFAULT '',
    user_agent   TEXT        NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX sessions_token_hash ON sessions (token_hash);
CREATE INDEX sessions_user ON sessions (user_id);

-- Single-use links sent by e-mail (verification, password reset), stored hashed.
CREATE TABLE email_tokens (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    BIGINT      NOT NULL REFERENCES users (id),
    purpose    TEXT        NOT NULL CHECK (purpose IN ('verify', 'reset')),
    token_hash TEXT        NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL,
    used_at    DATETIME
);
CREATE UNIQUE INDEX email_tokens_token_hash ON email_tokens (token_hash);
CREATE INDEX email_tokens_user ON email_tokens (user_id, purpose, created_at);

-- +goose Down
DROP TABLE email_tokens;
DROP TABLE sessions;
ALTER TABLE users DROP COLUMN time_zone;
ALTER TABLE users DROP COLUMN terms_accepted_at;
