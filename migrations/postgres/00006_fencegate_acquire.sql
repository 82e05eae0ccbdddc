-- fencegate_acquire is the lease coordinator's acquisition in one statement
-- (sqlstore.LeaseAcquirer), so that an acquisition costs one round trip
-- instead of one per step. It holds the same steps, in the same order, as
-- the coordinator's transaction on a database without it: the lock timeout,
-- the locking read of the lease row, the request-id check, nextval, the
-- lease write with its request record, and the floor raise, all in the
-- transaction of the statement that calls it. Where that transaction rolls
-- back a grant whose floor raise is refused, this one checks the floor
-- before it writes (or deletes the row it just inserted).
--
-- status is one of:
--   granted          a new generation: the lease columns are it
--   retried          the live lease this very request made: the lease columns
--   held             someone's live lease (the lease columns) blocks the grant
--   request_expired  this request made the lease with fence r_fence, now over
--   floor_ahead      the floor (r_floor, r_floor_holder) is above the new
--                    fence r_fence; nothing was written
-- Times are integer microseconds since the Unix epoch; now_us is the clock
-- after the lock wait (and, for a grant, the grant instant).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    l        fencegate_lease%ROWTYPE;
    found_l  boolean;
    live     boolean;
    t        timestamptz;
    v_fence  bigint;
    v_floor  bigint;
    v_holder text;
BEGIN
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    -- Two attempts suffice: an insert that loses the race to a concurrent
    -- first acquisition reads the winner's live lease next time.
    FOR attempt IN 1..3 LOOP
        SELECT * INTO l FROM fencegate_lease WHERE fencegate_lease.resource = p_resource FOR UPDATE;
        found_l := FOUND;
        t := clock_timestamp(); -- after any wait for the lock
        live := found_l AND NOT l.released AND l.expires_at > t;
        IF live AND l.holder = p_holder AND l.request_id = p_request_id THEN
            RETURN QUERY SELECT 'retried', l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;
        SELECT r.fence INTO v_fence FROM fencegate_request r
         WHERE r.resource = p_resource AND r.request_id = p_request_id;
        IF FOUND THEN
            RETURN QUERY SELECT 'request_expired', p_resource, p_holder, 0::bigint, p_request_id,
                0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, 0::bigint, ''::text;
            RETURN;
        END IF;
        IF live THEN
            RETURN QUERY SELECT 'held', l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;

        -- Free (never leased, expired or released): a new generation,
        -- unless the floor is above its fence. The floor is checked (and
        -- locked) once the lease row is this transaction's: a row locked
        -- above, or one just inserted (a first acquisition that loses the
        -- insert to a concurrent one reads the winner's lease instead).
        v_fence := nextval('fencegate_fence_seq');
        t := clock_timestamp();
        IF found_l THEN
            SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
             WHERE f.resource = p_resource FOR NO KEY UPDATE;
            IF FOUND AND v_floor > v_fence THEN
                RETURN QUERY SELECT 'floor_ahead', p_resource, p_holder, 0::bigint, p_request_id,
                    0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, v_floor, v_holder;
                RETURN;
            END IF;
            UPDATE fencegate_lease SET holder = p_holder, fence = v_fence, request_id = p_request_id,
                   granted_at = t, expires_at = t + p_ttl_us * interval '1 microsecond', released = false
             WHERE fencegate_lease.resource = p_resource;
        ELSE
            INSERT INTO fencegate_lease AS n (resource, holder, fence, request_id, granted_at, expires_at, released)
            VALUES (p_resource, p_holder, v_fence, p_request_id, t, t + p_ttl_us * interval '1 microsecond', false)
            ON CONFLICT ON CONSTRAINT fencegate_lease_pkey DO NOTHING;
            IF NOT FOUND THEN
                CONTINUE; -- a concurrent first acquisition created the row: read it
            END IF;
            SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
             WHERE f.resource = p_resource FOR NO KEY UPDATE;
            IF FOUND AND v_floor > v_fence THEN
                DELETE FROM fencegate_lease WHERE fencegate_lease.resource = p_resource; -- this transaction's own row
                RETURN QUERY SELECT 'floor_ahead', p_resource, p_holder, 0::bigint, p_request_id,
                    0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, v_floor, v_holder;
                RETURN;
            END IF;
        END IF;
        INSERT INTO fencegate_request (resource, request_id, fence) VALUES (p_resource, p_request_id, v_fence)
        ON CONFLICT ON CONSTRAINT fencegate_request_pkey DO NOTHING;

        -- Co-located mode: raise the gate's floor in this transaction, so
        -- the grant and the refusal of every older fence commit together.
        INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
        VALUES (p_resource, v_fence, p_holder, clock_timestamp())
        ON CONFLICT ON CONSTRAINT fencegate_floor_pkey DO UPDATE SET
            floor = GREATEST(f.floor, excluded.floor),
            holder = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
            updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END;

        RETURN QUERY SELECT 'granted', p_resource, p_holder, v_fence, p_request_id,
            (extract(epoch FROM t) * 1000000)::bigint,
            (extract(epoch FROM t + p_ttl_us * interval '1 microsecond') * 1000000)::bigint,
            false, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'fencegate: %: the lease row kept changing under a concurrent acquisition', p_resource;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_acquire(text, text, text, bigint, text);
