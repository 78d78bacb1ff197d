-- +goose Up
-- Staff search by any part of an address (lower(email) LIKE '%…%') has an index on PostgreSQL (see its
-- migration). SQLite has none that serves a LIKE whose pattern starts with a wildcard: the search reads
-- the users table. This migration keeps both dialects at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
