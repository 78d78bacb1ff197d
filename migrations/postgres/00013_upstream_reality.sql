-- +goose Up
-- Why a credential takes no new task: 'key' (the provider refused the key) or 'credit' (the provider
-- account is out of credit). Both are cleared by a reload; staff see which (docs/upstreams.md#health).
ALTER TABLE upstream_credentials ADD COLUMN auth_error_kind TEXT;
-- The routes (credential × model) the provider refused on this instance, as "alias: why" lines:
-- only those take no new task, until a reload.
ALTER TABLE upstream_health ADD COLUMN closed_routes TEXT NOT NULL DEFAULT '';
-- What the provider reports it rendered, where it does (docs/upstreams.md#rendered); NULL: not reported.
ALTER TABLE tasks ADD COLUMN rendered_seed BIGINT;
ALTER TABLE tasks ADD COLUMN rendered_size TEXT;
ALTER TABLE tasks ADD COLUMN rendered_resolution TEXT;
ALTER TABLE tasks ADD COLUMN rendered_ratio TEXT;
ALTER TABLE tasks ADD COLUMN rendered_seconds DOUBLE PRECISION;
ALTER TABLE tasks ADD COLUMN rendered_fps INTEGER;
-- The video's last frame as the provider returned it (content?variant=last_frame), stored beside the
-- other stills under the same retention; its type as stored (image/jpeg or image/png).
ALTER TABLE tasks ADD COLUMN last_frame_key TEXT;
ALTER TABLE tasks ADD COLUMN last_frame_type TEXT;
-- A task we gave up on while the provider still had it: whether the provider stopped it
-- ('cancelled', 'not_cancellable', 'failed'); NULL when nothing was asked.
ALTER TABLE tasks ADD COLUMN upstream_cancel TEXT;

-- +goose Down
ALTER TABLE tasks DROP COLUMN upstream_cancel;
ALTER TABLE tasks DROP COLUMN last_frame_type;
ALTER TABLE tasks DROP COLUMN last_frame_key;
ALTER TABLE tasks DROP COLUMN rendered_fps;
ALTER TABLE tasks DROP COLUMN rendered_seconds;
ALTER TABLE tasks DROP COLUMN rendered_ratio;
ALTER TABLE tasks DROP COLUMN rendered_resolution;
ALTER TABLE tasks DROP COLUMN rendered_size;
ALTER TABLE tasks DROP COLUMN rendered_seed;
ALTER TABLE upstream_health DROP COLUMN closed_routes;
ALTER TABLE upstream_credentials DROP COLUMN auth_error_kind;
