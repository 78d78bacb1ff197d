-- +goose Up
-- When the customer deleted the task through the API (DELETE /v1/videos/{id}): from then on the API
-- answers for it as for an unknown id and its stored video is gone, while the row, its task log and its
-- ledger entries stay — the console and staff show it as deleted. NULL: not deleted.
ALTER TABLE tasks ADD COLUMN deleted_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE tasks DROP COLUMN deleted_at;
