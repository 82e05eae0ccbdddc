-- fencegate schema for MySQL 8 and MariaDB 10.5+ (InnoDB). Names are prefixed
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
-- One row per grant; fencegate never deletes them.
CREATE TABLE IF NOT EXISTS fencegate_request (
    resource   VARBINARY(256) NOT NULL,
    request_id VARBINARY(128) NOT NULL,
    fence      BIGINT         NOT NULL CHECK (fence > 0),
    PRIMARY KEY (resource, request_id)
) ENGINE = InnoDB;

-- +goose Down
DROP TABLE IF EXISTS fencegate_request;
DROP TABLE IF EXISTS fencegate_rejection;
DROP TABLE IF EXISTS fencegate_lease;
DROP TABLE IF EXISTS fencegate_floor;
DROP TABLE IF EXISTS fencegate_fence_seq;
