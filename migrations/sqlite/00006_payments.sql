-- +goose Up
-- Money from Stripe (docs/stripe.md). Three new ledger kinds take money back out when Stripe gives it
-- back: a refund, a dispute, and the credit that returns a dispute's amount when it is won.
-- SQLite cannot change a CHECK constraint in place: the ledger is copied into a table that has the new
-- one, row for row (ids kept), and its indexes are made again.
CREATE TABLE ledger_entries_new (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id      BIGINT      NOT NULL REFERENCES accounts (id),
    kind            TEXT        NOT NULL CHECK (kind IN ('topup', 'test_topup', 'adjustment', 'reserve', 'settle', 'release', 'refund', 'dispute', 'dispute_won')),
    delta_available BIGINT      NOT NULL,
    delta_reserved  BIGINT      NOT NULL,
    available_after BIGINT      NOT NULL,
    reserved_after  BIGINT      NOT NULL,
    task_id         TEXT,
    reason          TEXT        NOT NULL DEFAULT '',
    actor           TEXT        NOT NULL DEFAULT '',
    external_id     TEXT,
    created_at      DATETIME NOT NULL
);
INSERT INTO ledger_entries_new SELECT id, account_id, kind, delta_available, delta_reserved, available_after,
    reserved_after, task_id, reason, actor, external_id, created_at FROM ledger_entries;
DROP TABLE ledger_entries;
ALTER TABLE ledger_entries_new RENAME TO ledger_entries;
CREATE INDEX ledger_entries_account ON ledger_entries (account_id, id);
CREATE UNIQUE INDEX ledger_entries_task_kind ON ledger_entries (task_id, kind) WHERE task_id IS NOT NULL;
CREATE UNIQUE INDEX ledger_entries_external ON ledger_entries (kind, external_id) WHERE external_id IS NOT NULL;

-- What an account has agreed with us about payments: its Stripe Customer (created once), the card it
-- saved for auto-recharge, and the two balance thresholds it watches. The *_armed flags make each alert
-- fire once per crossing: the charge that takes available under a threshold disarms it and marks the
-- work due, in its own transaction; a credit that lifts available back to the threshold re-arms it.
CREATE TABLE billing_profiles (
    account_id             BIGINT PRIMARY KEY REFERENCES accounts (id),
    stripe_customer_id     TEXT UNIQUE,
    payment_method_id      TEXT        NOT NULL DEFAULT '',
    card_label             TEXT        NOT NULL DEFAULT '',
    low_balance_micros     BIGINT      NOT NULL DEFAULT 0 CHECK (low_balance_micros >= 0),
    low_balance_armed      BOOLEAN     NOT NULL DEFAULT TRUE,
    low_balance_due        BOOLEAN     NOT NULL DEFAULT FALSE,
    recharge_enabled       BOOLEAN     NOT NULL DEFAULT FALSE,
    recharge_below_micros  BIGINT      NOT NULL DEFAULT 0 CHECK (recharge_below_micros >= 0),
    recharge_amount_micros BIGINT      NOT NULL DEFAULT 0 CHECK (recharge_amount_micros >= 0),
    recharge_armed         BOOLEAN     NOT NULL DEFAULT TRUE,
    recharge_due           BOOLEAN     NOT NULL DEFAULT FALSE,
    recharge_off_reason    TEXT        NOT NULL DEFAULT '',
    updated_at             DATETIME NOT NULL
);
CREATE INDEX billing_profiles_due ON billing_profiles (account_id) WHERE low_balance_due OR recharge_due;

-- One attempt to put money in: a Checkout Session the customer pays, or an off-session charge of the
-- saved card (auto-recharge). Credited at most once: the ledger's unique (kind, external_id) holds the
-- session or PaymentIntent id, and so do the unique columns here.
CREATE TABLE topups (
    id                       TEXT PRIMARY KEY,
    account_id               BIGINT      NOT NULL REFERENCES accounts (id),
    user_id                  BIGINT REFERENCES users (id),
    source                   TEXT        NOT NULL CHECK (source IN ('checkout', 'auto_recharge')),
    state                    TEXT        NOT NULL CHECK (state IN ('pending', 'credited', 'failed', 'expired', 'canceled')),
    amount_micros            BIGINT      NOT NULL CHECK (amount_micros > 0),
    credited_micros          BIGINT      NOT NULL DEFAULT 0,
    save_card                BOOLEAN     NOT NULL DEFAULT FALSE,
    stripe_session_id        TEXT UNIQUE,
    stripe_payment_intent_id TEXT UNIQUE,
    flag                     TEXT        NOT NULL DEFAULT '',
    failure                  TEXT        NOT NULL DEFAULT '',
    receipt_url              TEXT        NOT NULL DEFAULT '',
    receipt_due              BOOLEAN     NOT NULL DEFAULT FALSE,
    attempts                 INTEGER     NOT NULL DEFAULT 0,
    next_attempt_at          DATETIME,
    created_at               DATETIME NOT NULL,
    updated_at               DATETIME NOT NULL,
    credited_at              DATETIME
);
CREATE INDEX topups_account ON topups (account_id, created_at DESC);
-- The background job's work: receipts to send, auto-recharges to charge.
CREATE INDEX topups_work ON topups (next_attempt_at) WHERE next_attempt_at IS NOT NULL;

-- Every Stripe event received, by its id: a replay is recognised by the primary key, and an event is
-- processed by the one transaction that moves it out of 'pending'. Events that name a payment we do not
-- know yet (a refund before its payment) wait here and are tried again.
CREATE TABLE stripe_events (
    id              TEXT PRIMARY KEY,
    type            TEXT        NOT NULL,
    payload         TEXT        NOT NULL,
    state           TEXT        NOT NULL CHECK (state IN ('pending', 'processed', 'ignored')),
    note            TEXT        NOT NULL DEFAULT '',
    attempts        INTEGER     NOT NULL DEFAULT 0,
    stripe_created  DATETIME NOT NULL,
    received_at     DATETIME NOT NULL,
    next_attempt_at DATETIME,
    processed_at    DATETIME
);
CREATE INDEX stripe_events_pending ON stripe_events (next_attempt_at) WHERE state = 'pending';

-- +goose Down
DROP TABLE stripe_events;
DROP TABLE topups;
DROP TABLE billing_profiles;
