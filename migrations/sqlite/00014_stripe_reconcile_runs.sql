-- +goose Up
-- Each completed reconciliation with Stripe. The PostgreSQL migration explains the table.
CREATE TABLE stripe_reconcile_runs (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    at              DATETIME NOT NULL,
    owner           TEXT     NOT NULL DEFAULT '',
    since           DATETIME NOT NULL,
    sessions        INTEGER  NOT NULL DEFAULT 0,
    payment_intents INTEGER  NOT NULL DEFAULT 0,
    differences     INTEGER  NOT NULL,
    applied         INTEGER  NOT NULL DEFAULT 0,
    detail          TEXT     NOT NULL DEFAULT ''
);
CREATE INDEX stripe_reconcile_runs_at ON stripe_reconcile_runs (at DESC);

-- +goose Down
DROP TABLE stripe_reconcile_runs;
