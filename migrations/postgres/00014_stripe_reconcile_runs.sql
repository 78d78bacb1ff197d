-- +goose Up
-- Each completed reconciliation with Stripe (the daily background run and `videogen stripe reconcile`),
-- newest last: /metrics exports the newest one's differences so an alert sees what the run only logged.
-- A run that failed part-way records nothing: no row means no answer.
CREATE TABLE stripe_reconcile_runs (
    id              BIGSERIAL PRIMARY KEY,
    at              TIMESTAMPTZ NOT NULL,
    owner           TEXT        NOT NULL DEFAULT '', -- the instance, or cli:user@host
    since           TIMESTAMPTZ NOT NULL,            -- the period compared starts here
    sessions        INTEGER     NOT NULL DEFAULT 0,  -- paid Checkout Sessions of videogen's listed
    payment_intents INTEGER     NOT NULL DEFAULT 0,  -- succeeded auto-recharge PaymentIntents listed
    differences     INTEGER     NOT NULL,            -- left after the run (not those --apply credited)
    applied         INTEGER     NOT NULL DEFAULT 0,  -- credited by --apply during the run
    detail          TEXT        NOT NULL DEFAULT ''  -- the first differences, one a line
);
CREATE INDEX stripe_reconcile_runs_at ON stripe_reconcile_runs (at DESC);

-- +goose Down
DROP TABLE stripe_reconcile_runs;
