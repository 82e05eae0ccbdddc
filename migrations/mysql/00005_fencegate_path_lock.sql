-- Path claims (gate.PathResource): a claim of a path locks its row
-- exclusively and the rows of the directories above it shared; a write to
-- a file locks the rows of the directories above it shared and reads their
-- floors. Two claims that overlap queue on the shallower path's row,
-- siblings never wait on each other, and a directory's claim waits for the
-- writes below it in flight (lease's and gate's docs, Paths). The rows hold
-- nothing but the lock. Idempotent, as 00001.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS fencegate_path_lock (
    resource VARBINARY(256) NOT NULL PRIMARY KEY
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE IF EXISTS fencegate_path_lock;
