-- +goose Up
-- The payments' queued work moves onto River (docs/jobs.md, "Payments"): what the background job found by
-- polling these tables becomes a job of its kind, due now, and the tables lose their retry columns. The
-- args are what the Go kinds marshal to, their attempts what the kinds declare (billing/payments/jobs.go).

-- Events still pending (failed, or waiting for their payment): their processing job.
INSERT INTO river_job (args, kind, queue, max_attempts, priority, state, scheduled_at, created_at)
SELECT jsonb(json_object('event_id', id)), 'stripe_event', 'payments', 100, 1, 'available',
       strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', 'now')
FROM stripe_events WHERE state = 'pending' ORDER BY stripe_created, id;

-- Credited top-ups whose receipt is not sent: their receipt job (receipt_due stays: the guard that sends
-- one receipt per top-up).
INSERT INTO river_job (args, kind, queue, max_attempts, priority, state, scheduled_at, created_at)
SELECT jsonb(json_object('topup_id', id)), 'topup_receipt', 'payments', 25, 1, 'available',
       strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', 'now')
FROM topups WHERE receipt_due ORDER BY credited_at, id;

-- Auto-recharges started and not charged yet: their charge job.
INSERT INTO river_job (args, kind, queue, max_attempts, priority, state, scheduled_at, created_at)
SELECT jsonb(json_object('topup_id', id)), 'recharge_charge', 'payments', 8, 1, 'available',
       strftime('%Y-%m-%d %H:%M:%f', 'now'), strftime('%Y-%m-%d %H:%M:%f', 'now')
FROM topups WHERE source = 'auto_recharge' AND state = 'pending' AND stripe_payment_intent_id IS NULL ORDER BY created_at, id;

DROP INDEX topups_work;
ALTER TABLE topups DROP COLUMN attempts;
ALTER TABLE topups DROP COLUMN next_attempt_at;
DROP INDEX stripe_events_pending;
ALTER TABLE stripe_events DROP COLUMN attempts;
ALTER TABLE stripe_events DROP COLUMN next_attempt_at;
-- The events a credit applies at once (processWaiting): pending ones of a type that waits.
CREATE INDEX stripe_events_pending ON stripe_events (type) WHERE state = 'pending';

-- +goose Down
DROP INDEX stripe_events_pending;
ALTER TABLE stripe_events ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stripe_events ADD COLUMN next_attempt_at DATETIME;
UPDATE stripe_events SET next_attempt_at = CURRENT_TIMESTAMP WHERE state = 'pending';
CREATE INDEX stripe_events_pending ON stripe_events (next_attempt_at) WHERE state = 'pending';
ALTER TABLE topups ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE topups ADD COLUMN next_attempt_at DATETIME;
UPDATE topups SET next_attempt_at = CURRENT_TIMESTAMP
WHERE receipt_due OR (source = 'auto_recharge' AND state = 'pending' AND stripe_payment_intent_id IS NULL);
CREATE INDEX topups_work ON topups (next_attempt_at) WHERE next_attempt_at IS NOT NULL;
DELETE FROM river_job WHERE kind IN ('stripe_event', 'topup_receipt', 'recharge_charge', 'balance_alerts', 'stripe_reconcile')
    AND state NOT IN ('completed', 'cancelled', 'discarded');
