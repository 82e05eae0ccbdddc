-- fencegate_semaphore stores each semaphore's number of permits
-- (lease.Semaphore): every participant reads it before it grants a permit,
-- so lowering it (Semaphore.SetPermits) takes effect for all of them at
-- once, whatever N each was built with. Lowering it revokes no live
-- permit: the semaphore grants nothing until fewer than the new N are live.
-- The bound is lease.MaxPermits.

-- +goose Up
CREATE TABLE fencegate_semaphore (
    name    TEXT    PRIMARY KEY,
    permits INTEGER NOT NULL CHECK (permits BETWEEN 1 AND 1024)
);

-- +goose Down
DROP TABLE fencegate_semaphore;
