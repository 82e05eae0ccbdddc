-- fencegate_request.made_at is when the request made its lease (UTC, the
-- database's clock), so that lease.Coordinator.Prune can delete the rows no
-- retry can need any more (older than the longest term a request could ask
-- for: package lease's doc, "Bounded tables"). Rows that exist already are
-- dated by this migration, later than they were made: kept a little
-- longer, never pruned early. New rows are dated by the insert.

-- +goose Up
ALTER TABLE fencegate_request ADD COLUMN made_at DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00';
UPDATE fencegate_request SET made_at = UTC_TIMESTAMP(6);

-- +goose Down
ALTER TABLE fencegate_request DROP COLUMN made_at;
