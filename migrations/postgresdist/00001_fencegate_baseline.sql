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
-- of it is never granted again. made_at dates each row, so that
-- Coordinator.Prune can delete the rows no retry can use any more.
CREATE TABLE IF NOT EXISTS fencegate_request (
    resource   text        NOT NULL,
    request_id text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence > 0),
    made_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (resource, request_id)
);

-- Acquisitions waiting their turn; seq, the place, comes from the 'waiter'
-- counter. A waiter that accepts a hand-over (handover.Do) says so in
-- its row: request_id, the acquisition request the hand-over's grant
-- records and answers, and term_us, the term it asked for. touched_at is
-- the database's clock at the row's last touch (or insert): a handed-over
-- term is dated from it (package lease's doc, "Hand-over"). The hand-over
-- runs the shared steps here, as acquisitions do.
CREATE TABLE IF NOT EXISTS fencegate_waiter (
    seq        bigint      PRIMARY KEY,
    resource   text        NOT NULL,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL,
    request_id text,
    term_us    bigint,
    touched_at timestamptz
);
CREATE INDEX IF NOT EXISTS fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- fencegate_semaphore stores each semaphore's number of permits
-- (semaphore.Semaphore), as the default driver's does: every participant reads
-- it before it grants a permit. A plain table, written by an upsert the
-- driver sends.
CREATE TABLE IF NOT EXISTS fencegate_semaphore (
    name       text        PRIMARY KEY,
    permits    integer     NOT NULL CHECK (permits BETWEEN 1 AND 1024),
    updated_at timestamptz NOT NULL
);

-- Path claims (fence.PathResource), as the default driver's, in plain
-- statements: a row per path ever locked, taken by an upsert the driver
-- sends (sqlstore/pgxv5/distributed). The profile takes a directory's lock
-- exclusively also where the default driver shares it (no function here to
-- create-then-share in one call): sibling claims queue on their directory's
-- row for the length of a grant, and never refuse each other.
CREATE TABLE IF NOT EXISTS fencegate_path_lock (
    resource text PRIMARY KEY
);

-- +goose Down
DROP TABLE IF EXISTS fencegate_path_lock;
DROP TABLE IF EXISTS fencegate_semaphore;
DROP TABLE IF EXISTS fencegate_waiter;
DROP TABLE IF EXISTS fencegate_request;
DROP TABLE IF EXISTS fencegate_rejection;
DROP TABLE IF EXISTS fencegate_lease;
DROP TABLE IF EXISTS fencegate_floor;
DROP TABLE IF EXISTS fencegate_counter;
