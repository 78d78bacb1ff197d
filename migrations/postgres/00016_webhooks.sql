-- +goose Up
-- Customers' webhook endpoints (docs/webhooks.md). The signing secret must be read back to sign, so it
-- cannot be hashed: it is sealed with a key derived from APP_SECRET (internal/infra/seal), and a copy of
-- the database alone reveals none. After a rotation the previous secret keeps signing beside the new one
-- until previous_until.
CREATE TABLE webhook_endpoints (
    id                     TEXT PRIMARY KEY,                -- we_…
    account_id             BIGINT      NOT NULL REFERENCES accounts (id),
    url                    TEXT        NOT NULL,
    events                 TEXT        NOT NULL,            -- event types, comma-separated
    secret_sealed          BYTEA       NOT NULL,
    secret_hint            TEXT        NOT NULL,            -- whsec_ and the secret's last 4 characters
    previous_secret_sealed BYTEA,
    previous_until         TIMESTAMPTZ,
    enabled                BOOLEAN     NOT NULL DEFAULT TRUE,
    disabled_reason        TEXT        NOT NULL DEFAULT '',
    failing_since          TIMESTAMPTZ,                     -- first failed attempt since the last success
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_endpoints_account ON webhook_endpoints (account_id, created_at);

-- Events, written in the transaction of what they report (a task's terminal transition): an outbox.
-- payload is the exact body every attempt sends, so a retry is byte for byte the first attempt.
CREATE TABLE webhook_events (
    id         TEXT PRIMARY KEY,                            -- evt_…, also every delivery's webhook-id
    account_id BIGINT      NOT NULL REFERENCES accounts (id),
    type       TEXT        NOT NULL,
    subject_id TEXT        NOT NULL,                        -- the video the event is about
    payload    TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_events_created ON webhook_events (created_at);

-- One event to one endpoint, until it is delivered (a 2xx) or given up after about 3 days.
CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    event_id        TEXT        NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    endpoint_id     TEXT        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    attempts        INTEGER     NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ NOT NULL,
    next_attempt_at TIMESTAMPTZ,                            -- NULL once delivered or given up
    lease_owner     TEXT,
    lease_until     TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    failed_at       TIMESTAMPTZ
);
-- The delivery loop's scan: due deliveries, soonest first.
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id DESC);
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_id);

-- Each attempt and what came of it, for the console's deliveries list.
CREATE TABLE webhook_attempts (
    id          BIGSERIAL PRIMARY KEY,
    delivery_id BIGINT      NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    endpoint_id TEXT        NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    attempt     INTEGER     NOT NULL,
    at          TIMESTAMPTZ NOT NULL,
    status      INTEGER     NOT NULL DEFAULT 0,             -- the HTTP status; 0 when there was no answer
    latency_ms  INTEGER     NOT NULL DEFAULT 0,
    response    TEXT        NOT NULL DEFAULT '',            -- the first bytes of the answer
    error       TEXT        NOT NULL DEFAULT ''             -- why there was no usable answer (refused, timeout, …)
);
CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (endpoint_id, id DESC);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);

-- +goose Down
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_events;
DROP TABLE webhook_endpoints;
