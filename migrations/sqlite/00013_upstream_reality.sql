-- +goose Up
-- What the provider reported rendering, the last frame and its type, the upstream cancel, and why a
-- credential takes no new task. The PostgreSQL migration explains each column.
ALTER TABLE upstream_credentials ADD COLUMN auth_error_kind TEXT;
ALTER TABLE upstream_health ADD COLUMN closed_routes TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN rendered_seed INTEGER;
ALTER TABLE tasks ADD COLUMN rendered_size TEXT;
ALTER TABLE tasks ADD COLUMN rendered_resolution TEXT;
ALTER TABLE tasks ADD COLUMN rendered_ratio TEXT;
ALTER TABLE tasks ADD COLUMN rendered_seconds REAL;
ALTER TABLE tasks ADD COLUMN rendered_fps INTEGER;
ALTER TABLE tasks ADD COLUMN last_frame_key TEXT;
ALTER TABLE tasks ADD COLUMN last_frame_type TEXT;
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
