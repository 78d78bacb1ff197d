-- +goose Up
-- The video a remix was made from; the PostgreSQL migration explains the column.
ALTER TABLE tasks ADD COLUMN remixed_from_video_id TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN remixed_from_video_id;
