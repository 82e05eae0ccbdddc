-- fencegate_request.made_at dates each request row, as migrations/postgres
-- 00017 does for the default driver, so that Coordinator.Prune can delete
-- the rows no retry can use any more. Rows already there are dated now:
-- pruned late, never early.

-- +goose NO TRANSACTION
-- +goose Up
ALTER TABLE fencegate_request ADD COLUMN IF NOT EXISTS made_at timestamptz NOT NULL DEFAULT clock_timestamp();

-- +goose Down
ALTER TABLE fencegate_request DROP COLUMN IF EXISTS made_at;
