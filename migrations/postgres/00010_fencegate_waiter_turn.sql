-- The waiter queue made cheap, and its announcements aimed at one waiter.
--
-- fencegate_waiter becomes UNLOGGED: its statements write no WAL, so a
-- waiter's joining, touching and leaving commit without waiting for a
-- flush. The queue is an ordering aid, not a safety mechanism: the lease row
-- and the fence decide who may write. A crash empties an unlogged table;
-- waiters then find their places gone and queue again (the order among them
-- is lost once, nothing else), and a standby has no queue until promoted,
-- when the waiters queue again on it the same way.
--
-- A grant is no longer announced, only a release: an announcing commit
-- holds Postgres's cluster-wide notify lock until it ends, and a grant's
-- commit waits for its WAL flush, so announcing grants serialized every
-- grant of every resource behind one another's flush. A grant only made the
-- first waiter look again and find the lease held; without it the first
-- waiter learns the new holder's expiry when its timer fires.
--
-- fencegate_lease_notify names the resource's first live waiter in its
-- announcement, and the schema of the tables, as resource, chr(31), seq (or
-- nothing when no waiter is queued), chr(31), schema (resource names hold no
-- control characters): a listener wakes that waiter only, not the first of
-- its own, and ignores another schema's announcements, whose places are
-- another queue's. A waiter
-- leaving the queue is announced only when it was the first and the lease is
-- not live (a waiter cancelled after a release): after its grant, or behind
-- a live holder, the next waiter has nothing to gain from looking now (the
-- release is announced, and the next waiter finds an expiry by its timer).

-- +goose Up
ALTER TABLE fencegate_waiter SET UNLOGGED;

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

DROP TRIGGER fencegate_lease_granted ON fencegate_lease;
DROP TRIGGER fencegate_lease_changed ON fencegate_lease;
CREATE TRIGGER fencegate_lease_released AFTER UPDATE ON fencegate_lease
    FOR EACH ROW WHEN (NEW.released AND NOT OLD.released)
    EXECUTE FUNCTION fencegate_lease_notify();

-- +goose Down
DROP TRIGGER fencegate_lease_released ON fencegate_lease;
CREATE TRIGGER fencegate_lease_granted AFTER INSERT ON fencegate_lease
    FOR EACH ROW EXECUTE FUNCTION fencegate_lease_notify();
CREATE TRIGGER fencegate_lease_changed AFTER UPDATE ON fencegate_lease
    FOR EACH ROW WHEN (NEW.released <> OLD.released OR NEW.fence <> OLD.fence)
    EXECUTE FUNCTION fencegate_lease_notify();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('fencegate_lease', OLD.resource);
    ELSE
        PERFORM pg_notify('fencegate_lease', NEW.resource);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
ALTER TABLE fencegate_waiter SET LOGGED;
