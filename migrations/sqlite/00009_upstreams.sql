-- +goose Up
-- The operator's upstream pool (docs/upstreams.md). The PostgreSQL migration explains each column.
ALTER TABLE upstream_credentials ADD COLUMN base_url TEXT NOT NULL DEFAULT '';
ALTER TABLE upstream_credentials ADD COLUMN auth_error TEXT;
ALTER TABLE upstream_credentials ADD COLUMN auth_error_key TEXT;
ALTER TABLE upstream_credentials ADD COLUMN auth_error_at DATETIME;

CREATE TABLE upstream_health (
    credential_id TEXT     NOT NULL,
    instance      TEXT     NOT NULL,
    breaker       TEXT     NOT NULL,
    calls         BIGINT   NOT NULL DEFAULT 0,
    errors        BIGINT   NOT NULL DEFAULT 0,
    p50_ms        BIGINT   NOT NULL DEFAULT 0,
    p95_ms        BIGINT   NOT NULL DEFAULT 0,
    p99_ms        BIGINT   NOT NULL DEFAULT 0,
    last_error    TEXT     NOT NULL DEFAULT '',
    last_error_at DATETIME,
    updated_at    DATETIME NOT NULL,
    PRIMARY KEY (credential_id, instance)
);

CREATE TABLE control_signals (
    name       TEXT PRIMARY KEY,
    seq        BIGINT   NOT NULL DEFAULT 0,
    updated_at DATETIME NOT NULL
);

-- Each instance's answer to the newest reload signal it acted on: the signal's seq and why it refused
-- the file ('' when it installed it). `videogen upstreams reload` waits for every live instance's.
CREATE TABLE upstream_reload_acks (
    instance TEXT PRIMARY KEY,
    seq      BIGINT      NOT NULL,
    error    TEXT        NOT NULL DEFAULT '',
    at       DATETIME    NOT NULL
);

ALTER TABLE tasks ADD COLUMN upstream_model TEXT;
ALTER TABLE tasks ADD COLUMN usage_completion_tokens BIGINT;
ALTER TABLE tasks ADD COLUMN usage_total_tokens BIGINT;
ALTER TABLE tasks ADD COLUMN upstream_cost_micros BIGINT;
ALTER TABLE tasks ADD COLUMN seed BIGINT;
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
