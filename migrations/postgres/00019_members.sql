-- +goose Up
-- An account's members and their roles (docs/members.md). users.account_role is what a person may do in
-- their account: owner, admin, developer, billing or viewer — distinct from users.role, which says whether
-- they are videogen staff. Every user before this migration made or signed up for their own account, so
-- each is its owner. removed_at is set when an owner or admin removes the member (or they leave): the row
-- stays, so the ledger, keys and call log still name who did what, but it signs in no more.
ALTER TABLE users ADD COLUMN account_role TEXT NOT NULL DEFAULT 'owner'
    CHECK (account_role IN ('owner', 'admin', 'developer', 'billing', 'viewer'));
ALTER TABLE users ADD COLUMN removed_at TIMESTAMPTZ;
CREATE INDEX users_account_role ON users (account_id, account_role) WHERE removed_at IS NULL;

-- An invitation to join an account, sent by e-mail: only the hash of its link's token is kept. It is
-- pending until accepted, revoked (or replaced by a newer one to the same address), or expired (7 days).
CREATE TABLE invitations (
    id          BIGSERIAL PRIMARY KEY,
    account_id  BIGINT      NOT NULL REFERENCES accounts (id),
    email       TEXT        NOT NULL,
    role        TEXT        NOT NULL CHECK (role IN ('owner', 'admin', 'developer', 'billing', 'viewer')),
    token_hash  TEXT        NOT NULL,
    invited_by  BIGINT      NOT NULL REFERENCES users (id),
    created_at  TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    accepted_at TIMESTAMPTZ,
    accepted_by BIGINT REFERENCES users (id),
    revoked_at  TIMESTAMPTZ
);
CREATE UNIQUE INDEX invitations_token_hash ON invitations (token_hash);
CREATE INDEX invitations_account ON invitations (account_id, created_at);

-- +goose Down
DROP TABLE invitations;
DROP INDEX users_account_role;
ALTER TABLE users DROP COLUMN removed_at;
ALTER TABLE users DROP COLUMN account_role;
