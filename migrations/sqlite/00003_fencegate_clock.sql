-- The coordinator's clock never runs backwards. SQLite's clock is the
-- host's wall clock, which an operator or NTP can step back; a lease judged
-- expired would then look live again and could be renewed. fencegate keeps
-- the highest time it has judged by (hw, integer microseconds since the
-- Unix epoch): every statement that grants, renews, releases or judges
-- expiry first raises it to the wall clock and then reads it, and every
-- other time fencegate stamps is at least hw. After a backward step the
-- clock stands still until the wall clock catches up: leases last that much
-- longer in real time, and none comes back to life.

-- +goose Up
CREATE TABLE fencegate_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    hw INTEGER NOT NULL
);
INSERT INTO fencegate_clock (id, hw)
SELECT 1, max(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000,
              coalesce((SELECT max(granted_at) FROM fencegate_lease), 0));

-- +goose Down
DROP TABLE fencegate_clock;
