-- fencegate_request.made_at is when the request made its lease (integer
-- microseconds on the coordinator's clock of migration 00003), so that
-- lease.Coordinator.Prune can delete the rows no retry can need any more
-- (older than the longest term a request could ask for: package lease's
-- doc, "Bounded tables"). Rows that exist already are dated by this
-- migration, later than they were made: kept a little longer, never pruned
-- early. New rows are dated by the insert (SQLite's ADD COLUMN takes no
-- expression as a default).

-- +goose Up
ALTER TABLE fencegate_request ADD COLUMN made_at INTEGER NOT NULL DEFAULT 0;
UPDATE fencegate_request SET made_at = max(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000,
                                           coalesce((SELECT hw FROM fencegate_clock WHERE id = 1), 0));

-- +goose Down
ALTER TABLE fencegate_request DROP COLUMN made_at;
