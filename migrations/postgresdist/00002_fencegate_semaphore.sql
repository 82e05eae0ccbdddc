-- fencegate_semaphore stores each semaphore's number of permits
-- (lease.Semaphore), as migrations/postgres 00015 does for the default
-- driver: every participant reads it before it grants a permit. A plain
-- table, written by an upsert the driver sends.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS fencegate_semaphore (
    name       text        PRIMARY KEY,
    permits    integer     NOT NULL CHECK (permits BETWEEN 1 AND 1024),
    updated_at timestamptz NOT NULL
);

-- +goose Down
DROP TABLE IF EXISTS fencegate_semaphore;
