-- Path claims (gate.PathResource), as migrations/postgres 00016 does for
-- the default driver, in plain statements: a row per path ever locked,
-- taken by an upsert the driver sends (sqlstore/pgxv5/distributed). The
-- profile takes a directory's lock exclusively also where the default
-- driver shares it (no function here to create-then-share in one call):
-- sibling claims queue on their directory's row for the length of a
-- grant, and never refuse each other.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS fencegate_path_lock (
    resource text PRIMARY KEY
);

-- +goose Down
DROP TABLE IF EXISTS fencegate_path_lock;
