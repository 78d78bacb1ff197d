-- +goose Up
-- Customers' webhook endpoints, their events, deliveries and attempts. The PostgreSQL migration
-- explains the tables.
CREATE TABLE webhook_endpoints (
    id                     TEXT PRIMARY KEY,
    account_id             INTEGER  NOT NULL REFERENCES accounts (id),
    url                    TEXT     NOT NULL,
    events                 TEXT     NOT NULL,
    secret_sealed          BLOB     NOT NULL,
    secret_hint            TEXT     NOT NULL,
    previous_secret_sealed BLOB,
    previous_until         DATETIME,
    enabled                BOOLEAN  NOT NULL DEFAULT TRUE,
    disabled_reason        TEXT     NOT NULL DEFAULT '',
    failing_since          DATETIME,
    created_at             DATETIME NOT NULL,
    updated_at             DATETIME NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at);

CREATE TABLE webhook_events (
    id         TEXT PRIMARY KEY,
    account_id INTEGER  NOT NULL REFERENCES accounts (id),
    type       TEXT     NOT NULL,
    subject_id TEXT     NOT NULL,
    payload    TEXT     NOT NULL,
    created_at DATETIME NOT NULL
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT     NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    endpoint_id     TEXT     NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    attempts        INTEGER  NOT NULL DEFAULT 0,
    created_at      DATETIME NOT NULL,
    next_attempt_at DATETIME,
    lease_owner     TEXT,
    lease_until     DATETIME,
    delivered_at    DATETIME,
    failed_at       DATETIME
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

CREATE TABLE webhook_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id INTEGER  NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id TEXT     NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    attempt     INTEGER  NOT NULL,
    at          DATETIME NOT NULL,
    status      INTEGER  NOT NULL DEFAULT 0,
    latency_ms  INTEGER  NOT NULL DEFAULT 0,
    response    TEXT     NOT NULL DEFAULT '',
    error       TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id DESC);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
