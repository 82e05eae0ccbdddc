-- fencegate schema for Postgres. Names are prefixed so they never clash with
-- the host application's tables.

-- +goose Up
-- CACHE 1: a per-session cache would hand out fences out of order.
CREATE SEQUENCE fencegate_fence_seq AS bigint MINVALUE 1 START 1 CACHE 1 NO CYCLE;

-- One row per guarded resource; fillfactor leaves room for HOT updates of a
-- hot floor row.
CREATE TABLE fencegate_floor (
    resource   text        PRIMARY KEY,
    floor      bigint      NOT NULL CHECK (floor > 0),
    holder     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
) WITH (fillfactor = 50);

-- The coordinator's current generation per resource.
CREATE TABLE fencegate_lease (
    resource   text        PRIMARY KEY,
    holder     text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence > 0),
    request_id text        NOT NULL,
    granted_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    released   boolean     NOT NULL DEFAULT false
) WITH (fillfactor = 50);

-- Every refusal: the evidence that two holders overlapped.
CREATE TABLE fencegate_rejection (
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource     text        NOT NULL,
    fence        bigint      NOT NULL,
    holder       text        NOT NULL,
    floor        bigint      NOT NULL,
    floor_holder text        NOT NULL,
    not_issued   boolean     NOT NULL DEFAULT false,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX fencegate_rejection_resource_seq ON fencegate_rejection (resource, seq);

-- +goose Down
DROP TABLE fencegate_rejection;
DROP TABLE fencegate_lease;
DROP TABLE fencegate_floor;
DROP SEQUENCE fencegate_fence_seq;
