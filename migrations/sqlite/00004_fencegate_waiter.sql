-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
-- expires_at is in microseconds since the Unix epoch, as elsewhere.

-- +goose Up
CREATE TABLE fencegate_waiter (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    resource   TEXT    NOT NULL,
    holder     TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- +goose Down
DROP TABLE fencegate_waiter;
