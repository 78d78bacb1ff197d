-- +goose Up
-- Webhook deliveries are River jobs (docs/jobs.md, "Webhook deliveries"): each delivery still to be
-- attempted becomes its job, due when the delivery was, with the attempts it has left; then the
-- delivery loop's lease columns go. The row stays as the record the console shows.
INSERT INTO river_job (args, kind, queue, priority, max_attempts, state, scheduled_at, created_at)
SELECT jsonb(json_object('delivery_id', id, 'before', attempts)), 'webhook_delivery', 'webhooks', 1,
       MAX(1, 10 - attempts),
       CASE WHEN next_attempt_at <= datetime('now', 'subsec') THEN 'available' ELSE 'scheduled' END,
       strftime('%Y-%m-%d %H:%M:%f', next_attempt_at), datetime('now', 'subsec')
FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL ORDER BY id;
ALTER TABLE webhook_deliveries DROP COLUMN lease_owner;
ALTER TABLE webhook_deliveries DROP COLUMN lease_until;

-- +goose Down
ALTER TABLE webhook_deliveries ADD COLUMN lease_owner TEXT;
ALTER TABLE webhook_deliveries ADD COLUMN lease_until TIMESTAMP;
DELETE FROM river_job WHERE kind = 'webhook_delivery';
