-- +goose Up
-- An account's members and their roles, and invitations to join it; the PostgreSQL migration explains
-- the columns and the table.
ALTER TABLE users ADD COLUMN account_role TEXT NOT NULL DEFAULT 'owner'
    CHECK (account_role IN ('owner', 'admin', 'developer', 'billing', 'viewer'));
ALTER TABLE users ADD COLUMN removed_at DATETIME;
CREATE INDEX users_account_role ON users (account_id, account_role) WHERE removed_at IS NULL;

CREATE TABLE invitations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id  BIGINT   NOT NULL REFERENCES accounts (id),
    email       TEXT     NOT NULL,
    role        TEXT     NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'billing', 'viewer')),
    token_hash  TEXT     NOT NULL,
    invited_by  BIGINT   NOT NULL REFERENCES users (id),
    created_at  DATETIME NOT NULL,
    expires_at  DATETIME NOT NULL,
    accepted_at DATETIME,
    accepted_by BIGINT REFERENCES users (id),
    revoked_at  DATETIME
);
CREATE UNIQUE INDEX invitations_token_hash ON invitations (token_hash);
CREATE INDEX invitations_account ON invitations (account_id, created_at);

-- +goose Down
DROP TABLE invitations;
DROP INDEX users_account_role;
ALTER TABLE users DROP COLUMN removed_at;
ALTER TABLE users DROP COLUMN account_role;
