-- fencegate schema for MySQL 8 and MariaDB 10.6+ (InnoDB). Names are prefixed
-- so they never clash with the host application's tables.
--
-- Names and holders are VARBINARY, compared byte for byte as on Postgres and
-- SQLite: a case-insensitive or PAD SPACE collation would make "a", "A" and
-- "a " one resource. Times are DATETIME(6) holding UTC_TIMESTAMP(6): no time
-- zone, no 2038 limit.
--
-- MySQL commits every DDL statement on its own, so no transaction can make
-- this file atomic. Every statement is idempotent instead: a run cut short
-- (or raced by another process before it took the migration lock) is
-- finished by the next.

-- +goose NO TRANSACTION
-- +goose Up

-- The fence counter: one row, bumped with LAST_INSERT_ID(last + 1) in the
-- granting transaction, so a fence is durable with its lease and rolled back
-- with it. Not AUTO_INCREMENT: MySQL does not promise never to reuse those
-- values after a crash.
CREATE TABLE IF NOT EXISTS fencegate_fence_seq (
    id   TINYINT NOT NULL PRIMARY KEY,
    last BIGINT  NOT NULL CHECK (last >= 0)
) ENGINE = InnoDB;
INSERT INTO fencegate_fence_seq (id, last) VALUES (1, 0) ON DUPLICATE KEY UPDATE id = id;

-- One row per guarded resource, keyed by the primary key alone: the floor
-- upsert locks that one record, and no secondary index adds gap locks.
CREATE TABLE IF NOT EXISTS fencegate_floor (
    resource   VARBINARY(256) NOT NULL PRIMARY KEY,
    floor      BIGINT         NOT NULL CHECK (floor > 0),
    holder     VARBINARY(256) NOT NULL,
    updated_at DATETIME(6)    NOT NULL
) ENGINE = InnoDB;

-- The coordinator's current generation per resource.
CREATE TABLE IF NOT EXISTS fencegate_lease (
    resource   VARBINARY(256) NOT NULL PRIMARY KEY,
    holder     VARBINARY(256) NOT NULL,
    fence      BIGINT         NOT NULL CHECK (fence > 0),
    request_id VARBINARY(128) NOT NULL,
    granted_at DATETIME(6)    NOT NULL,
    expires_at DATETIME(6)    NOT NULL,
    released   BOOLEAN        NOT NULL DEFAULT FALSE
) ENGINE = InnoDB;

-- Every refusal: the evidence that two holders overlapped. Written on its
-- own connection after the refused transaction rolled back.
CREATE TABLE IF NOT EXISTS fencegate_rejection (
    seq          BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    resource     VARBINARY(256) NOT NULL,
    fence        BIGINT         NOT NULL,
    holder       VARBINARY(256) NOT NULL,
    floor        BIGINT         NOT NULL,
    floor_holder VARBINARY(256) NOT NULL,
    not_issued   BOOLEAN        NOT NULL DEFAULT FALSE,
    at           DATETIME(6)    NOT NULL,
    KEY fencegate_rejection_resource_seq (resource, seq)
) ENGINE = InnoDB;

-- Every acquisition request that made a generation, so that a retry of it
-- arriving after that lease expired or was released is never granted again.
-- One row per grant. made_at is when the request made its lease (UTC, the
-- database's clock), so that lease.Coordinator.Prune can delete the rows no
-- retry can need any more (older than the longest term a request could ask
-- for: package lease's doc, "Bounded tables"); the insert dates each row.
CREATE TABLE IF NOT EXISTS fencegate_request (
    resource   VARBINARY(256) NOT NULL,
    request_id VARBINARY(128) NOT NULL,
    fence      BIGINT         NOT NULL CHECK (fence > 0),
    made_at    DATETIME(6)    NOT NULL DEFAULT '1970-01-01 00:00:00',
    PRIMARY KEY (resource, request_id)
) ENGINE = InnoDB;

-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
--
-- A waiter that accepts a hand-over (handover.Do) says so in its row:
-- request_id, the acquisition request the hand-over's grant records and
-- answers, and term_us, the term it asked for. touched_at is the
-- database's clock (UTC) at the row's last touch (or insert): a
-- handed-over term is dated from it (package lease's doc, "Hand-over"). A
-- row without them is not handed over.
CREATE TABLE IF NOT EXISTS fencegate_waiter (
    seq        BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    resource   VARBINARY(256) NOT NULL,
    holder     VARBINARY(256) NOT NULL,
    expires_at DATETIME(6)    NOT NULL,
    request_id VARBINARY(256) NULL,
    term_us    BIGINT         NULL,
    touched_at DATETIME(6)    NULL,
    KEY fencegate_waiter_resource_seq (resource, seq)
) ENGINE = InnoDB;

-- fencegate_semaphore stores each semaphore's number of permits
-- (semaphore.Semaphore): every participant reads it before it grants a permit,
-- so lowering it (Semaphore.SetPermits) takes effect for all of them at
-- once, whatever N each was built with. Lowering it revokes no live
-- permit: the semaphore grants nothing until fewer than the new N are live.
-- The bound is semaphore.MaxPermits.
CREATE TABLE IF NOT EXISTS fencegate_semaphore (
    name    VARBINARY(256) NOT NULL PRIMARY KEY,
    permits INT            NOT NULL CHECK (permits BETWEEN 1 AND 1024)
) ENGINE = InnoDB;

-- Path claims (fence.PathResource): a claim of a path locks its row
-- exclusively and the rows of the directories above it shared; a write to
-- a file locks the rows of the directories above it shared and reads their
-- floors. Two claims that overlap queue on the shallower path's row,
-- siblings never wait on each other, and a directory's claim waits for the
-- writes below it in flight (lease's and gate's docs, Paths). The rows hold
-- nothing but the lock.
CREATE TABLE IF NOT EXISTS fencegate_path_lock (
    resource VARBINARY(256) NOT NULL PRIMARY KEY
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE IF EXISTS fencegate_path_lock;
DROP TABLE IF EXISTS fencegate_semaphore;
DROP TABLE IF EXISTS fencegate_waiter;
DROP TABLE IF EXISTS fencegate_request;
DROP TABLE IF EXISTS fencegate_rejection;
DROP TABLE IF EXISTS fencegate_lease;
DROP TABLE IF EXISTS fencegate_floor;
DROP TABLE IF EXISTS fencegate_fence_seq;
