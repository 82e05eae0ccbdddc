-- fencegate schema for distributed SQL engines that speak the Postgres
-- protocol: plain tables only. Names are prefixed so they never clash with
-- the host application's tables.

-- +goose NO TRANSACTION
-- +goose Up

-- The counters that replace sequences: 'fence' is the last fence issued,
-- 'rejection' the last rejection number, 'waiter' the last waiter place.
-- Taking one is UPDATE ... SET value = value + 1 RETURNING value in the
-- transaction that uses it, so two transactions taking the same counter
-- conflict (one waits or aborts) and a value, once committed, is never
-- handed out again: no cache, no reordering across nodes.
CREATE TABLE IF NOT EXISTS fencegate_counter (
    name  text   PRIMARY KEY,
    value bigint NOT NULL CHECK (value >= 0)
);
INSERT INTO fencegate_counter (name, value) VALUES ('fence', 0), ('rejection', 0), ('waiter', 0)
ON CONFLICT (name) DO NOTHING;

-- One row per guarded resource.
CREATE TABLE IF NOT EXISTS fencegate_floor (
    resource   text        PRIMARY KEY,
    floor      bigint      NOT NULL CHECK (floor > 0),
    holder     text        NOT NULL,
    updated_at timestamptz NOT NULL
);

-- The coordinator's current generation per resource.
CREATE TABLE IF NOT EXISTS fencegate_lease (
    resource   text        PRIMARY KEY,
    holder     text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence > 0),
    request_id text        NOT NULL,
    granted_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    released   boolean     NOT NULL DEFAULT false
);

-- Every refusal: the evidence that two holders overlapped. seq comes from
-- the 'rejection' counter.
CREATE TABLE IF NOT EXISTS fencegate_rejection (
    seq          bigint      PRIMARY KEY,
    resource     text        NOT NULL,
    fence        bigint      NOT NULL,
    holder       text        NOT NULL,
    floor        bigint      NOT NULL,
    floor_holder text        NOT NULL,
    not_issued   boolean     NOT NULL DEFAULT false,
    at           timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS fencegate_rejection_resource_seq ON fencegate_rejection (resource, seq);

-- Every acquisition request that made a generation, so that a late retry
-- of it is never granted again. fencegate never deletes them.
CREATE TABLE IF NOT EXISTS fencegate_request (
    resource   text   NOT NULL,
    request_id text   NOT NULL,
    fence      bigint NOT NULL CHECK (fence > 0),
    PRIMARY KEY (resource, request_id)
);

-- Acquisitions waiting their turn; seq, the place, comes from the 'waiter'
-- counter.
CREATE TABLE IF NOT EXISTS fencegate_waiter (
    seq        bigint      PRIMARY KEY,
    resource   text        NOT NULL,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- +goose Down
DROP TABLE IF EXISTS fencegate_waiter;
DROP TABLE IF EXISTS fencegate_request;
DROP TABLE IF EXISTS fencegate_rejection;
DROP TABLE IF EXISTS fencegate_lease;
DROP TABLE IF EXISTS fencegate_floor;
DROP TABLE IF EXISTS fencegate_counter;
