-- +goose Up
CREATE TABLE accounts (
    id               BIGSERIAL PRIMARY KEY,
    name             TEXT        NOT NULL DEFAULT '',
    available_micros BIGINT      NOT NULL DEFAULT 0,
    reserved_micros  BIGINT      NOT NULL DEFAULT 0 CHECK (reserved_micros >= 0),
    -- Tasks of the account waiting for an upstream slot (queued, no credential yet): kept exact in the
    -- transactions that change it, so the backlog check is one guarded UPDATE, not a count.
    waiting_tasks    INTEGER     NOT NULL DEFAULT 0 CHECK (waiting_tasks >= 0),
    created_at       TIMESTAMPTZ NOT NULL,
    updated_at       TIMESTAMPTZ NOT NULL
);

CREATE TABLE users (
    id                BIGSERIAL PRIMARY KEY,
    account_id        BIGINT      NOT NULL REFERENCES accounts (id),
    email             TEXT        NOT NULL,
    password_hash     TEXT        NOT NULL DEFAULT '',
    role              TEXT        NOT NULL DEFAULT 'member' CHECK (role IN ('member', 'support', 'admin')),
    email_verified_at TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL,
    updated_at        TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX users_email ON users (email);

CREATE TABLE api_keys (
    id           BIGSERIAL PRIMARY KEY,
    account_id   BIGINT      NOT NULL REFERENCES accounts (id),
    created_by   BIGINT REFERENCES users (id),
    name         TEXT        NOT NULL DEFAULT '',
    prefix       TEXT        NOT NULL,
    secret_hash  TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    last_used_at TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);
CREATE UNIQUE INDEX api_keys_prefix ON api_keys (prefix);
CREATE UNIQUE INDEX api_keys_secret_hash ON api_keys (secret_hash);
CREATE INDEX api_keys_account ON api_keys (account_id);

CREATE TABLE prices (
    model             TEXT PRIMARY KEY,
    micros_per_second BIGINT      NOT NULL CHECK (micros_per_second > 0),
    updated_at        TIMESTAMPTZ NOT NULL
);

CREATE TABLE ledger_entries (
    id              BIGSERIAL PRIMARY KEY,
    account_id      BIGINT      NOT NULL REFERENCES accounts (id),
    kind            TEXT        NOT NULL CHECK (kind IN ('topup', 'test_topup', 'adjustment', 'reserve', 'settle', 'release')),
    delta_available BIGINT      NOT NULL,
    delta_reserved  BIGINT      NOT NULL,
    available_after BIGINT      NOT NULL,
    reserved_after  BIGINT      NOT NULL,
    task_id         TEXT,
    reason          TEXT        NOT NULL DEFAULT '',
    actor           TEXT        NOT NULL DEFAULT '',
    external_id     TEXT,
    created_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX ledger_entries_account ON ledger_entries (account_id, id);
-- A task is reserved, settled or released at most once each: the database refuses a second one.
CREATE UNIQUE INDEX ledger_entries_task_kind ON ledger_entries (task_id, kind) WHERE task_id IS NOT NULL;
-- A Stripe session or event credits at most once.
CREATE UNIQUE INDEX ledger_entries_external ON ledger_entries (kind, external_id) WHERE external_id IS NOT NULL;

CREATE TABLE upstream_credentials (
    id              TEXT PRIMARY KEY,
    provider        TEXT        NOT NULL,
    label           TEXT        NOT NULL DEFAULT '',
    max_concurrency INTEGER     NOT NULL CHECK (max_concurrency >= 0),
    in_flight       INTEGER     NOT NULL DEFAULT 0 CHECK (in_flight >= 0),
    enabled         BOOLEAN     NOT NULL DEFAULT TRUE,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);

CREATE TABLE tasks (
    id                     TEXT PRIMARY KEY,
    account_id             BIGINT      NOT NULL REFERENCES accounts (id),
    api_key_id             BIGINT,
    model                  TEXT        NOT NULL,
    prompt                 TEXT        NOT NULL,
    seconds                INTEGER     NOT NULL,
    size                   TEXT        NOT NULL,
    aspect_ratio           TEXT        NOT NULL,
    generate_audio         BOOLEAN     NOT NULL DEFAULT FALSE,
    watermark              BOOLEAN     NOT NULL DEFAULT FALSE,
    inputs                 TEXT        NOT NULL DEFAULT '{}',
    status                 TEXT        NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'failed')),
    progress               INTEGER     NOT NULL DEFAULT 0,
    price_micros           BIGINT      NOT NULL,
    amount_micros          BIGINT      NOT NULL,
    billing_state          TEXT        NOT NULL CHECK (billing_state IN ('reserved', 'settled', 'released')),
    error_code             TEXT,
    error_message          TEXT,
    credential_id          TEXT REFERENCES upstream_credentials (id),
    upstream_task_id       TEXT,
    upstream_key           TEXT,
    submit_attempts        INTEGER     NOT NULL DEFAULT 0,
    poll_count             INTEGER     NOT NULL DEFAULT 0,
    next_check_at          TIMESTAMPTZ NOT NULL,
    queue_deadline         TIMESTAMPTZ NOT NULL,
    run_deadline           TIMESTAMPTZ,
    submitted_at           TIMESTAMPTZ,
    lease_owner            TEXT,
    lease_until            TIMESTAMPTZ,
    output_key             TEXT,
    output_bytes           BIGINT,
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL,
    completed_at           TIMESTAMPTZ,
    expires_at             TIMESTAMPTZ
);
CREATE INDEX tasks_account_created ON tasks (account_id, created_at DESC, id DESC);
-- Tasks running upstream, by next check: only tasks holding a credential slot are in it, so the
-- worker's claim reads a handful of rows however many tasks wait for a slot.
CREATE INDEX tasks_inflight ON tasks (next_check_at) WHERE status IN ('queued', 'in_progress') AND credential_id IS NOT NULL;
-- Tasks waiting for an upstream slot, oldest first.
CREATE INDEX tasks_waiting ON tasks (created_at, id) WHERE status = 'queued' AND credential_id IS NULL;
CREATE INDEX tasks_expiring ON tasks (expires_at) WHERE output_key IS NOT NULL;

CREATE TABLE task_events (
    id          BIGSERIAL PRIMARY KEY,
    task_id     TEXT        NOT NULL REFERENCES tasks (id),
    at          TIMESTAMPTZ NOT NULL,
    from_status TEXT        NOT NULL DEFAULT '',
    to_status   TEXT        NOT NULL,
    detail      TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX task_events_task ON task_events (task_id, id);

CREATE TABLE idempotency_keys (
    account_id   BIGINT      NOT NULL REFERENCES accounts (id),
    key          TEXT        NOT NULL,
    request_hash TEXT        NOT NULL,
    task_id      TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (account_id, key)
);

CREATE TABLE call_logs (
    id                     BIGSERIAL PRIMARY KEY,
    at                     TIMESTAMPTZ NOT NULL,
    request_id             TEXT        NOT NULL,
    account_id             BIGINT,
    key_prefix             TEXT        NOT NULL DEFAULT '',
    method                 TEXT        NOT NULL,
    path                   TEXT        NOT NULL,
    status                 INTEGER     NOT NULL,
    error_code             TEXT        NOT NULL DEFAULT '',
    latency_micros         BIGINT      NOT NULL,
    task_id                TEXT        NOT NULL DEFAULT '',
    amount_reserved_micros BIGINT      NOT NULL DEFAULT 0,
    bytes_in               BIGINT      NOT NULL DEFAULT 0,
    files                  INTEGER     NOT NULL DEFAULT 0
);
CREATE INDEX call_logs_account_at ON call_logs (account_id, at DESC, id DESC);
CREATE INDEX call_logs_at ON call_logs (at);

-- +goose Down
DROP TABLE call_logs;
DROP TABLE idempotency_keys;
DROP TABLE task_events;
DROP TABLE tasks;
DROP TABLE upstream_credentials;
DROP TABLE ledger_entries;
DROP TABLE prices;
DROP TABLE api_keys;
DROP TABLE users;
DROP TABLE accounts;
