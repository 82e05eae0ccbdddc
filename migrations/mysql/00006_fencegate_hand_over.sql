-- A waiter that accepts a hand-over (lease.DoHandOver) says so in its row:
-- request_id, the acquisition request the hand-over's grant records and
-- answers, and term_us, the term it asked for. touched_at is the
-- database's clock (UTC) at the row's last touch (or insert): a
-- handed-over term is dated from it (package lease's doc, "Hand-over").
-- Rows queued before this migration have none and are not handed over.

-- +goose Up
ALTER TABLE fencegate_waiter
    ADD COLUMN request_id VARBINARY(256) NULL,
    ADD COLUMN term_us    BIGINT         NULL,
    ADD COLUMN touched_at DATETIME(6)    NULL;

-- +goose Down
ALTER TABLE fencegate_waiter DROP COLUMN request_id, DROP COLUMN term_us, DROP COLUMN touched_at;
