-- +goose Up
-- When the customer deleted the task through the API; the PostgreSQL migration explains the column.
ALTER TABLE tasks ADD COLUMN deleted_at DATETIME;

-- +goose Down
ALTER TABLE tasks DROP COLUMN deleted_at;
