-- +goose Up
-- The staff side of the console (docs/support.md).

-- A disabled account's keys answer 401 account_disabled and its users cannot sign in.
ALTER TABLE accounts ADD COLUMN disabled_at TIMESTAMPTZ;
ALTER TABLE accounts ADD COLUMN disabled_reason TEXT NOT NULL DEFAULT '';

-- Staff sign in with a second factor: a TOTP secret (sealed with a key derived from APP_SECRET, since it
-- must be read back to check a code), the last time step accepted (a code is good once), and ten
-- single-use recovery codes stored hashed.
ALTER TABLE users ADD COLUMN last_sign_in_at TIMESTAMPTZ;
ALTER TABLE users ADD COLUMN totp_sealed BYTEA;
ALTER TABLE users ADD COLUMN totp_enabled_at TIMESTAMPTZ;
ALTER TABLE users ADD COLUMN totp_last_step BIGINT NOT NULL DEFAULT 0;
CREATE TABLE recovery_codes (
    id         BIGSERIAL PRIMARY KEY,
    user_id    BIGINT      NOT NULL REFERENCES users (id),
    code_hash  TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    used_at    TIMESTAMPTZ
);
CREATE INDEX recovery_codes_user ON recovery_codes (user_id);
-- When this session passed the second factor (staff pages need it).
ALTER TABLE sessions ADD COLUMN second_factor_at TIMESTAMPTZ;

-- Who changed a price and when; the audit log keeps every change.
ALTER TABLE prices ADD COLUMN updated_by TEXT NOT NULL DEFAULT '';

-- Every staff action and every staff look at a tenant. Append-only: the triggers below refuse any
-- UPDATE, DELETE or TRUNCATE, whoever runs it (a superuser included, short of dropping the trigger), and
-- the application's role loses those privileges too. docs/support.md says how to run the application
-- under a role that cannot drop the triggers either.
CREATE TABLE audit_log (
    id            BIGSERIAL PRIMARY KEY,
    at            TIMESTAMPTZ NOT NULL,
    actor_user_id BIGINT,
    actor         TEXT        NOT NULL,
    action        TEXT        NOT NULL,
    target_type   TEXT        NOT NULL DEFAULT '',
    target_id     TEXT        NOT NULL DEFAULT '',
    account_id    BIGINT,
    reason        TEXT        NOT NULL DEFAULT '',
    ip            TEXT        NOT NULL DEFAULT '',
    detail        TEXT        NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_account ON audit_log (account_id, id DESC);
CREATE INDEX audit_log_actor ON audit_log (actor, id DESC);

-- +goose StatementBegin
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM CURRENT_USER;

-- Staff open a call from its request id, and a task's calls from the task.
CREATE INDEX call_logs_request ON call_logs (request_id);
CREATE INDEX call_logs_task ON call_logs (task_id) WHERE task_id <> '';

-- The ledger self-check's results, newest last: the overview shows the last, /metrics counts drift.
CREATE TABLE ledger_checks (
    id          BIGSERIAL PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL,
    owner       TEXT        NOT NULL DEFAULT '',
    problems    INTEGER     NOT NULL,
    accounts    TEXT        NOT NULL DEFAULT '', -- ids of the accounts that drifted, comma-separated
    detail      TEXT        NOT NULL DEFAULT '',
    duration_ms BIGINT      NOT NULL DEFAULT 0
);
CREATE INDEX ledger_checks_at ON ledger_checks (at DESC);

-- +goose Down
DROP TABLE ledger_checks;
DROP INDEX call_logs_task;
DROP INDEX call_logs_request;
DROP TABLE audit_log;
DROP FUNCTION audit_log_append_only();
ALTER TABLE prices DROP COLUMN updated_by;
ALTER TABLE sessions DROP COLUMN second_factor_at;
DROP TABLE recovery_codes;
ALTER TABLE users DROP COLUMN totp_last_step;
ALTER TABLE users DROP COLUMN totp_enabled_at;
ALTER TABLE users DROP COLUMN totp_sealed;
ALTER TABLE users DROP COLUMN last_sign_in_at;
ALTER TABLE accounts DROP COLUMN disabled_reason;
ALTER TABLE accounts DROP COLUMN disabled_at;
