-- fencegate_semaphore stores each semaphore's number of permits
-- (lease.Semaphore): every participant reads it before it grants a permit,
-- so lowering it (Semaphore.SetPermits) takes effect for all of them at
-- once, whatever N each was built with. Lowering it revokes no live
-- permit: the semaphore grants nothing until fewer than the new N are live.
-- The bound is lease.MaxPermits. Idempotent, as 00001.

-- +goose NO TRANSACTION
-- +goose Up
CREATE TABLE IF NOT EXISTS fencegate_semaphore (
    name    VARBINARY(256) NOT NULL PRIMARY KEY,
    permits INT            NOT NULL CHECK (permits BETWEEN 1 AND 1024)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE IF EXISTS fencegate_semaphore;
