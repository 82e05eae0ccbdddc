-- fencegate schema for SQLite. Times are integer microseconds since the Unix
-- epoch, in the database's clock.

-- +goose Up
-- SQLite has no sequences: a one-row counter holding the last fence issued,
-- bumped inside the acquiring transaction.
CREATE TABLE fencegate_fence_seq (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL CHECK (last >= 0)
);
INSERT INTO fencegate_fence_seq (id, last) VALUES (1, 0);

CREATE TABLE fencegate_floor (
    resource   TEXT    PRIMARY KEY,
    floor      INTEGER NOT NULL CHECK (floor > 0),
    holder     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

CREATE TABLE fencegate_lease (
    resource   TEXT    PRIMARY KEY,
    holder     TEXT    NOT NULL,
    fence      INTEGER NOT NULL CHECK (fence > 0),
    request_id TEXT    NOT NULL,
    granted_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    released   INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE fencegate_rejection (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    resource     TEXT    NOT NULL,
    fence        INTEGER NOT NULL,
    holder       TEXT    NOT NULL,
    floor        INTEGER NOT NULL,
    floor_holder TEXT    NOT NULL,
    not_issued   INTEGER NOT NULL DEFAULT 0,
    at           INTEGER NOT NULL
);
CREATE INDEX fencegate_rejection_resource_seq ON fencegate_rejection (resource, seq);

-- +goose Down
DROP TABLE fencegate_rejection;
DROP TABLE fencegate_lease;
DROP TABLE fencegate_floor;
DROP TABLE fencegate_fence_seq;
