-- +goose Up
-- The staff side of the console (docs/support.md). The PostgreSQL migration explains each column.
ALTER TABLE accounts ADD COLUMN disabled_at DATETIME;
ALTER TABLE accounts ADD COLUMN disabled_reason TEXT NOT NULL DEFAULT '';

ALTER TABLE users ADD COLUMN last_sign_in_at DATETIME;
ALTER TABLE users ADD COLUMN totp_sealed BLOB;
ALTER TABLE users ADD COLUMN totp_enabled_at DATETIME;
ALTER TABLE users ADD COLUMN totp_last_step BIGINT NOT NULL DEFAULT 0;
CREATE TABLE recovery_codes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    BIGINT   NOT NULL REFERENCES users (id),
    code_hash  TEXT     NOT NULL,
    created_at DATETIME NOT NULL,
    used_at    DATETIME
);
CREATE INDEX recovery_codes_user ON recovery_codes (user_id);
ALTER TABLE sessions ADD COLUMN second_factor_at DATETIME;

ALTER TABLE prices ADD COLUMN updated_by TEXT NOT NULL DEFAULT '';

CREATE TABLE audit_log (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    at            DATETIME NOT NULL,
    actor_user_id BIGINT,
    actor         TEXT     NOT NULL,
    action        TEXT     NOT NULL,
    target_type   TEXT     NOT NULL DEFAULT '',
    target_id     TEXT     NOT NULL DEFAULT '',
    account_id    BIGINT,
    reason        TEXT     NOT NULL DEFAULT '',
    ip            TEXT     NOT NULL DEFAULT '',
    detail        TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log (at DESC, id DESC);
CREATE INDEX audit_log_account ON audit_log (account_id, id DESC);
CREATE INDEX audit_log_actor ON audit_log (actor, id DESC);
-- Append-only, as on PostgreSQL.
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused');
END;
-- +goose StatementEnd

-- Staff open a call from its request id, and a task's calls from the task.
CREATE INDEX call_logs_request ON call_logs (request_id);
CREATE INDEX call_logs_task ON call_logs (task_id) WHERE task_id <> '';

CREATE TABLE ledger_checks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          DATETIME NOT NULL,
    owner       TEXT     NOT NULL DEFAULT '',
    problems    INTEGER  NOT NULL,
    accounts    TEXT     NOT NULL DEFAULT '',
    detail      TEXT     NOT NULL DEFAULT '',
    duration_ms BIGINT   NOT NULL DEFAULT 0
);
CREATE INDEX ledger_checks_at ON ledger_checks (at DESC);

-- +goose Down
DROP TABLE ledger_checks;
DROP INDEX call_logs_task;
DROP INDEX call_logs_request;
DROP TABLE audit_log;
ALTER TABLE prices DROP COLUMN updated_by;
ALTER TABLE sessions DROP COLUMN second_factor_at;
DROP TABLE recovery_codes;
ALTER TABLE users DROP COLUMN totp_last_step;
ALTER TABLE users DROP COLUMN totp_enabled_at;
ALTER TABLE users DROP COLUMN totp_sealed;
ALTER TABLE users DROP COLUMN last_sign_in_at;
ALTER TABLE accounts DROP COLUMN disabled_reason;
ALTER TABLE accounts DROP COLUMN disabled_at;
