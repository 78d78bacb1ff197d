-- +goose Up
-- The operator's upstream pool (docs/upstreams.md).
-- provider holds the credential's kind (sim, openai, ark); base_url where it is spoken. Together they
-- name the upstream account an id belongs to: a start or reload that gives an existing id another kind
-- or base URL is refused, since tasks stored under that id must be polled at the account that made them.
ALTER TABLE upstream_credentials ADD COLUMN base_url TEXT NOT NULL DEFAULT '';
-- Why the credential takes no new task although it is configured: the provider refused the key itself
-- (401/403). Set by whichever instance saw it, cleared by a reload or restart that configures it again.
ALTER TABLE upstream_credentials ADD COLUMN auth_error TEXT;
-- A digest (SHA-256, truncated) of the key that was refused: a start with another key clears the mark.
ALTER TABLE upstream_credentials ADD COLUMN auth_error_key TEXT;
ALTER TABLE upstream_credentials ADD COLUMN auth_error_at TIMESTAMPTZ;

-- Each instance's view of each credential's health, written every few seconds: its circuit breaker,
-- calls and errors over the last window, latency percentiles, the last error. `videogen upstreams
-- status` and the staff overview read it; rows of instances gone quiet are ignored and later deleted.
CREATE TABLE upstream_health (
    credential_id TEXT        NOT NULL,
    instance      TEXT        NOT NULL,
    breaker       TEXT        NOT NULL,
    calls         BIGINT      NOT NULL DEFAULT 0,
    errors        BIGINT      NOT NULL DEFAULT 0,
    p50_ms        BIGINT      NOT NULL DEFAULT 0,
    p95_ms        BIGINT      NOT NULL DEFAULT 0,
    p99_ms        BIGINT      NOT NULL DEFAULT 0,
    last_error    TEXT        NOT NULL DEFAULT '',
    last_error_at TIMESTAMPTZ,
    updated_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (credential_id, instance)
);

-- `videogen upstreams reload` bumps this; every instance re-reads UPSTREAMS_FILE when it sees it change.
CREATE TABLE control_signals (
    name       TEXT PRIMARY KEY,
    seq        BIGINT      NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ NOT NULL
);

-- Each instance's answer to the newest reload signal it acted on: the signal's seq and why it refused
-- the file ('' when it installed it). `videogen upstreams reload` waits for every live instance's.
CREATE TABLE upstream_reload_acks (
    instance TEXT PRIMARY KEY,
    seq      BIGINT      NOT NULL,
    error    TEXT        NOT NULL DEFAULT '',
    at       TIMESTAMPTZ NOT NULL
);

-- What the task cost upstream: the provider's model it ran on, the usage the provider reported, and
-- the cost at the operator's configured price (micro-dollars), recorded when the output is copied.
ALTER TABLE tasks ADD COLUMN upstream_model TEXT;
ALTER TABLE tasks ADD COLUMN usage_completion_tokens BIGINT;
ALTER TABLE tasks ADD COLUMN usage_total_tokens BIGINT;
ALTER TABLE tasks ADD COLUMN upstream_cost_micros BIGINT;
-- The seed the customer asked for, if any (sent to providers that take one).
ALTER TABLE tasks ADD COLUMN seed BIGINT;
-- The margin report reads settled tasks by the day they completed.
CREATE INDEX tasks_completed ON tasks (completed_at) WHERE completed_at IS NOT NULL;

-- +goose Down
DROP INDEX tasks_completed;
ALTER TABLE tasks DROP COLUMN seed;
ALTER TABLE tasks DROP COLUMN upstream_cost_micros;
ALTER TABLE tasks DROP COLUMN usage_total_tokens;
ALTER TABLE tasks DROP COLUMN usage_completion_tokens;
ALTER TABLE tasks DROP COLUMN upstream_model;
DROP TABLE upstream_reload_acks;
DROP TABLE control_signals;
DROP TABLE upstream_health;
ALTER TABLE upstream_credentials DROP COLUMN auth_error_at;
ALTER TABLE upstream_credentials DROP COLUMN auth_error_key;
ALTER TABLE upstream_credentials DROP COLUMN auth_error;
ALTER TABLE upstream_credentials DROP COLUMN base_url;
