-- +goose Up
-- The still images kept beside a task's video; the PostgreSQL migration explains the columns.
ALTER TABLE tasks ADD COLUMN thumbnail_key TEXT;
ALTER TABLE tasks ADD COLUMN spritesheet_key TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN spritesheet_key;
ALTER TABLE tasks DROP COLUMN thumbnail_key;
