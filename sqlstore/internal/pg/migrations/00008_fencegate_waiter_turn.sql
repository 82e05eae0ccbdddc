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
-- fencegate_lease_notify names the resource's first live waiter in its
-- announcement, as "resource" || chr(31) || seq (resource names hold no
-- control characters), or the resource alone when no waiter is queued, so a
-- listener wakes that waiter only, not the first of its own. A waiter
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
    PERFORM pg_notify('fencegate_lease', CASE WHEN first IS NULL THEN res ELSE res || chr(31) || first END);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
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
