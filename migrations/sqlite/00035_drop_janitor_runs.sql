-- +goose Up
-- The claims of "one instance per interval" housekeeping went with the hand-made loops: River's elected
-- leader schedules the periodic chores and the reconciliation now (docs/jobs.md, "Periodic chores").
DROP TABLE janitor_runs;

-- +goose Down
CREATE TABLE janitor_runs (
    name       TEXT PRIMARY KEY,
    started_at DATETIME NOT NULL,
    owner      TEXT NOT NULL DEFAULT ''
);
