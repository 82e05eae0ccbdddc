-- A release is announced only when someone waits for it.
--
-- Every NOTIFY takes Postgres's cluster-wide notify lock at commit and
-- holds it until the commit ends, so announcing every release serialized
-- all releases of all resources behind one another (Lock:object waits from
-- 16 concurrent acquirers on). fencegate_lease_notify now announces a
-- release only when the resource has a live waiter (fencegate_waiter) or a
-- watcher (fencegate_watcher: a listener with no waiter row, such as
-- lease.Elector.Observe, or a semaphore's head of line watching its
-- permits). With neither, the trigger reads two index ranges and notifies
-- nobody, and the commit takes no notify lock.
--
-- No wake-up is lost by skipping (package lease's doc, "Waiting"):
--   a waiter that queues after the trigger's read touches its place and
--   tries to acquire afterwards, and the acquisition locks the lease row,
--   so it waits for the releasing commit and finds the lease released;
--   a watcher inserts its row (committed), then takes FOR SHARE on the
--   lease row of the resource it watches (which waits for a release in
--   flight: the release's UPDATE holds the row), then LISTENs, then looks:
--   either the trigger's query, which takes a snapshot of its own after the
--   UPDATE, sees the watcher row and announces, or the release committed
--   before the watcher looks. A watcher of a prefix (a semaphore's permits)
--   takes no row lock: what it does on waking is an acquisition of each
--   permit, which locks the row the same way.
--
-- A watcher row belongs to the listening session (pid): the listener
-- deletes it when it stops, and one whose session died is deleted by the
-- next watcher that registers. A stale row costs an announcement nobody
-- hears, never a missed one. The table is UNLOGGED like the waiter queue:
-- a crash takes the listening sessions with it.

--
-- fencegate_request.made_at is when the request made its lease (the
-- database's clock), so that lease.Coordinator.Prune can delete the rows
-- no retry can need any more (older than the longest term a request could
-- ask for: the lease's own doc, "Bounded tables", has the proof). Rows that
-- exist already are dated by this migration, which is later than they
-- were made: they are kept a little longer, never pruned early. now()
-- (stable) dates them without rewriting the table; new rows get
-- clock_timestamp(), read when the request is recorded, after it was sent.

-- +goose Up
ALTER TABLE fencegate_request ADD COLUMN made_at timestamptz NOT NULL DEFAULT now();
ALTER TABLE fencegate_request ALTER COLUMN made_at SET DEFAULT clock_timestamp();

CREATE UNLOGGED TABLE fencegate_watcher (
    pid      integer NOT NULL,
    resource text    NOT NULL,
    prefix   boolean NOT NULL,
    PRIMARY KEY (resource, prefix, pid)
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    res   text;
    first bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        res := OLD.resource;
        IF EXISTS (SELECT 1 FROM fencegate_waiter w
                    WHERE w.resource = res AND w.seq < OLD.seq AND w.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM fencegate_lease l
                       WHERE l.resource = res AND NOT l.released AND l.expires_at > clock_timestamp()) THEN
            RETURN NULL;
        END IF;
    ELSE
        res := NEW.resource;
    END IF;
    SELECT min(w.seq) INTO first FROM fencegate_waiter w
     WHERE w.resource = res AND w.expires_at > clock_timestamp();
    IF first IS NULL AND NOT EXISTS (
        SELECT 1 FROM fencegate_watcher o
         WHERE (o.resource = res AND NOT o.prefix) OR (o.prefix AND starts_with(res, o.resource))) THEN
        RETURN NULL; -- nobody waits: no NOTIFY, no notify lock at commit
    END IF;
    PERFORM pg_notify('fencegate_lease', res || chr(31) || coalesce(first::text, '') || chr(31) || TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    res   text;
    first bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        res := OLD.resource;
        IF EXISTS (SELECT 1 FROM fencegate_waiter w
                    WHERE w.resource = res AND w.seq < OLD.seq AND w.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM fencegate_lease l
                       WHERE l.resource = res AND NOT l.released AND l.expires_at > clock_timestamp()) THEN
            RETURN NULL;
        END IF;
    ELSE
        res := NEW.resource;
    END IF;
    SELECT min(w.seq) INTO first FROM fencegate_waiter w
     WHERE w.resource = res AND w.expires_at > clock_timestamp();
    PERFORM pg_notify('fencegate_lease', res || chr(31) || coalesce(first::text, '') || chr(31) || TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TABLE fencegate_watcher;
ALTER TABLE fencegate_request DROP COLUMN made_at;
