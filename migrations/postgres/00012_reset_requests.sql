-- +goose Up
-- Password-reset requests waiting to be handled (internal/domain/auth/reset.go). The form only adds a row, the
-- same work whether or not the address has an account, so its answer takes the same time either way;
-- a background job then looks the address up, issues the link and queues its e-mail, and deletes the
-- row in that same transaction. Rows live for seconds: an address nobody registered is kept no longer.
CREATE TABLE reset_requests (
    id           BIGSERIAL PRIMARY KEY,
    email        TEXT        NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE reset_requests;
