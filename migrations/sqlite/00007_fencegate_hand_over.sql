-- A waiter that accepts a hand-over (lease.DoHandOver) says so in its row:
-- request_id, the acquisition request the hand-over's grant records and
-- answers, and term_us, the term it asked for. touched_at is the clock at
-- the row's last touch (or insert), in microseconds since the Unix epoch:
-- a handed-over term is dated from it (package lease's doc, "Hand-over").
-- Rows queued before this migration have none and are not handed over.

-- +goose Up
ALTER TABLE fencegate_waiter ADD COLUMN request_id TEXT;
ALTER TABLE fencegate_waiter ADD COLUMN term_us INTEGER;
ALTER TABLE fencegate_waiter ADD COLUMN touched_at INTEGER;

-- +goose Down
ALTER TABLE fencegate_waiter DROP COLUMN touched_at;
ALTER TABLE fencegate_waiter DROP COLUMN term_us;
ALTER TABLE fencegate_waiter DROP COLUMN request_id;
