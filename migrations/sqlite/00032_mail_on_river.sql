-- +goose Up
-- E-mail and password-reset requests move to River (docs/jobs.md, "E-mail" and "Password resets"); River's
-- own tables are already here (its migrations run before ours). Each e-mail still pending becomes a job of
-- internal/infra/mail's SendArgs ({"id": its row}, queue mail, 100 attempts) carrying its attempts so far,
-- so its backoff goes on; each reset request waiting becomes a job of internal/domain/auth's ResetArgs
-- (queue mail, 30 attempts). The JSON must be what those structs marshal to. Times are written as River
-- writes them on SQLite ('YYYY-MM-DD HH:MM:SS.SSS', UTC), or they would not compare with its own.
INSERT INTO river_job (args, kind, queue, max_attempts, priority, state, attempt, scheduled_at, created_at)
SELECT jsonb(json_object('id', id)), 'mail_send', 'mail', 100, 1, 'available', attempts,
       strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', created_at)
FROM mail_outbox
WHERE sent_at IS NULL AND failed_at IS NULL
ORDER BY id;

INSERT INTO river_job (args, kind, queue, max_attempts, priority, state, attempt, scheduled_at, created_at)
SELECT jsonb(json_object('email', email, 'requested_at', strftime('%Y-%m-%dT%H:%M:%fZ', requested_at),
                         'client_ip', client_ip, 'device_user_id', device_user_id, 'device_epoch', device_epoch)),
       'password_reset', 'mail', 30, 1, 'available', 0,
       strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', requested_at)
FROM reset_requests
ORDER BY id;

-- The outbox keeps the record of each e-mail; River holds the lease, the attempts and the next attempt.
DROP INDEX mail_outbox_due;
ALTER TABLE mail_outbox DROP COLUMN attempts;
ALTER TABLE mail_outbox DROP COLUMN next_attempt_at;
ALTER TABLE mail_outbox DROP COLUMN lease_owner;
ALTER TABLE mail_outbox DROP COLUMN lease_until;
-- The e-mails not yet sent nor given up, oldest first (the staff's outbox signal, internal/staff/ops).
CREATE INDEX mail_outbox_due ON mail_outbox (created_at) WHERE sent_at IS NULL AND failed_at IS NULL;
DROP TABLE reset_requests;

-- +goose Down
-- The schema only: the jobs stay River's.
CREATE TABLE reset_requests (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    email          TEXT     NOT NULL,
    requested_at   DATETIME NOT NULL,
    client_ip      TEXT     NOT NULL DEFAULT '',
    device_user_id INTEGER,
    device_epoch   TEXT     NOT NULL DEFAULT ''
);
DROP INDEX mail_outbox_due;
ALTER TABLE mail_outbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE mail_outbox ADD COLUMN next_attempt_at DATETIME NOT NULL DEFAULT '1970-01-01 00:00:00';
ALTER TABLE mail_outbox ADD COLUMN lease_owner TEXT;
ALTER TABLE mail_outbox ADD COLUMN lease_until DATETIME;
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;
