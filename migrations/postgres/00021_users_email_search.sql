-- +goose Up
-- Staff search finds users by any part of their address (a name, a domain): lower(email) LIKE '%…%'
-- (internal/staff/staffsearch). The B-tree users_email serves equality and prefixes only; a trigram GIN
-- index on lower(email) serves a LIKE of any three characters or more, wherever they stand. It needs the
-- pg_trgm extension, shipped with PostgreSQL's contrib and trusted since PostgreSQL 13 (a database owner
-- may create it). It is created in the schema public when there is one, so that it outlives whichever
-- schema (a test's) first asked for it. Where it cannot be created the index is left out and the search
-- reads the users table: still right, only slower; a NOTICE says so (docs/decisions.md, "Staff search by
-- part of an address").
-- +goose StatementBegin
DO $$
DECLARE
    ext_schema TEXT;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA public;
        EXCEPTION WHEN OTHERS THEN
            -- No schema public, or no right to create in it: the schema the tables are in, then.
            BEGIN
                CREATE EXTENSION IF NOT EXISTS pg_trgm;
            EXCEPTION WHEN OTHERS THEN
                -- Not installed on the server, not allowed to this role, or created at this moment by
                -- another migration run (which the query below then finds).
                RAISE NOTICE 'pg_trgm not created here (%)', SQLERRM;
            END;
        END;
    END IF;
    SELECT n.nspname INTO ext_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    IF ext_schema IS NULL THEN
        RAISE NOTICE 'no pg_trgm: staff search by part of an address reads the users table';
        RETURN;
    END IF;
    BEGIN
        EXECUTE format('CREATE INDEX users_email_trgm ON users USING gin (lower(email) %I.gin_trgm_ops)', ext_schema);
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'no trigram index on users (%): staff search by part of an address reads the users table', SQLERRM;
    END;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS users_email_trgm;
