-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
-- Idempotent, as 00001.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS fencegate_waiter (
    seq        BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    resource   VARBINARY(256) NOT NULL,
    holder     VARBINARY(256) NOT NULL,
    expires_at DATETIME(6)    NOT NULL,
    KEY fencegate_waiter_resource_seq (resource, seq)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE IF EXISTS fencegate_waiter;
