-- +goose Up
-- Password-reset requests waiting to be handled. The PostgreSQL migration explains the table.
CREATE TABLE reset_requests (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    email        TEXT     NOT NULL,
    requested_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE reset_requests;
