-- +goose Up
-- Files customers upload or import, kept privately and handed out as signed URLs. A row is 'pending'
-- while its bytes are being written and 'ready' once the whole request succeeded, so a crash mid-upload
-- leaves a row the janitor finds (and deletes with its file) instead of an orphan file.
CREATE TABLE media (
    id           TEXT PRIMARY KEY,
    account_id   BIGINT      NOT NULL REFERENCES accounts (id),
    state        TEXT        NOT NULL CHECK (state IN ('pending', 'ready')),
    source       TEXT        NOT NULL CHECK (source IN ('upload', 'import')),
    part         TEXT        NOT NULL,
    kind         TEXT        NOT NULL CHECK (kind IN ('image', 'video', 'audio')),
    content_type TEXT        NOT NULL DEFAULT '',
    bytes        BIGINT      NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    sha256       TEXT        NOT NULL DEFAULT '',
    storage_key  TEXT        NOT NULL,
    origin       TEXT        NOT NULL DEFAULT '',
    created_at   TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL,
    deleted_at   TIMESTAMPTZ
);
CREATE INDEX media_account_created ON media (account_id, created_at DESC);
-- The janitor's scan: live files past their retention, oldest first.
CREATE INDEX media_expiring ON media (expires_at) WHERE deleted_at IS NULL;
-- Files whose deletion was started and not finished (a crash between the two steps).
CREATE INDEX media_deleting ON media (deleted_at) WHERE deleted_at IS NOT NULL;

-- Which files a task was created with, in the create request's order; the worker signs fresh URLs from
-- it at submission and the janitor keeps a file while an unfinished task uses it.
CREATE TABLE task_media (
    task_id  TEXT    NOT NULL REFERENCES tasks (id),
    field    TEXT    NOT NULL,
    position INTEGER NOT NULL,
    media_id TEXT    NOT NULL REFERENCES media (id),
    PRIMARY KEY (task_id, field, position)
);
CREATE INDEX task_media_media ON task_media (media_id);

-- +goose Down
DROP TABLE task_media;
DROP TABLE media;
