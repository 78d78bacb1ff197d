-- +goose Up
-- A remix (POST /v1/videos/{id}/remix) is a new task made from a completed video of the same account:
-- the id of that video, shown as the video object's remixed_from_video_id. NULL for every other task.
-- No foreign key: a source deleted later (DELETE /v1/videos/{id} keeps its row anyway) must not touch
-- its remixes.
ALTER TABLE tasks ADD COLUMN remixed_from_video_id TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN remixed_from_video_id;
