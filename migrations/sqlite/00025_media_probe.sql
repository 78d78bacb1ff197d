-- +goose Up
-- What probing found of each stored input file (docs/api.md#media-probing): the capability checks of
-- a create read the pixel size of images and videos and the duration of videos.
ALTER TABLE media ADD COLUMN width INTEGER NOT NULL DEFAULT 0;
ALTER TABLE media ADD COLUMN height INTEGER NOT NULL DEFAULT 0;
ALTER TABLE media ADD COLUMN duration_ms BIGINT NOT NULL DEFAULT 0;
-- How many times a task was submitted afresh on its route after a failure the provider calls passing
-- (Veo's audio filter): once at most (docs/upstreams.md#gemini).
ALTER TABLE tasks ADD COLUMN upstream_retries INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE tasks DROP COLUMN upstream_retries;
ALTER TABLE media DROP COLUMN duration_ms;
ALTER TABLE media DROP COLUMN height;
ALTER TABLE media DROP COLUMN width;
