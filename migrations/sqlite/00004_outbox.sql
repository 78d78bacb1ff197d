-- +goose Up
-- E-mails waiting to be delivered. A row is written in the same transaction as the event that causes the
-- mail (a sign-up, a reset request), so a crash can no longer lose it; a delivery worker on any instance
-- claims due rows with a lease, sends them with their idempotency key, and retries with backoff. The
-- bodies carry one-time links, so they are stored sealed with a key derived from APP_SECRET and blanked
-- once the message is sent or given up.
CREATE TABLE mail_outbox (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT     NOT NULL,
    recipient       TEXT     NOT NULL,
    subject         TEXT     NOT NULL,
    sealed_body     BLOB,
    idempotency_key TEXT     NOT NULL,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    created_at      DATETIME NOT NULL,
    next_attempt_at DATETIME NOT NULL,
    lease_owner     TEXT,
    lease_until     DATETIME,
    sent_at         DATETIME,
    failed_at       DATETIME,
    last_error      TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;
CREATE INDEX mail_outbox_created ON mail_outbox (created_at);

-- Housekeeping that one instance at a time should do: the instance that moves started_at forward past
-- the interval runs it.
CREATE TABLE janitor_runs (
    name       TEXT PRIMARY KEY,
    started_at DATETIME NOT NULL,
    owner      TEXT     NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE janitor_runs;
DROP TABLE mail_outbox;
