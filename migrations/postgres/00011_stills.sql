-- +goose Up
-- The still images kept beside a task's video (GET /v1/videos/{id}/content?variant=thumbnail|spritesheet):
-- storage keys next to output_key, under the same retention, forgotten with it. NULL: none stored (not
-- finished, expired, deleted, or the provider gave none and none could be made).
ALTER TABLE tasks ADD COLUMN thumbnail_key TEXT;
ALTER TABLE tasks ADD COLUMN spritesheet_key TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN spritesheet_key;
ALTER TABLE tasks DROP COLUMN thumbnail_key;
