-- A holder's release can hand the resource straight to its first live
-- waiter, inside the transaction of the holder's last fenced write
-- (lease.DoHandOver, pgxgate.CommitBatchHandOver), so that a turn of a
-- contended lock costs one durable commit instead of two: the write, the
-- release and the next grant commit together or not at all.
--
-- A waiter that accepts a hand-over says so in its row: request_id, the
-- acquisition request the grant records and answers, and term_us, the term
-- it asked for. touched_at is the database's clock at the row's last touch
-- (or insert): the waiter anchors a handed-over lease at the instant it
-- sent its last touch that was answered, which came before the touch ran,
-- so dating the term from touched_at keeps the holder's window inside the
-- coordinator's (package lease's doc, "Hand-over", has the proof). The
-- first term ends at the earlier of touched_at + term and the row's own
-- expiry: a waiter that died after its last touch keeps the resource no
-- longer than its place would have blocked the queue (WaiterTTL), and the
-- live waiter renews it to a full term.
--
-- fencegate_hand_over(resource, holder, fence) does it in the caller's
-- transaction: it locks the lease row, and, unless (resource, holder, fence)
-- is the live lease, returns released = false having written nothing;
-- otherwise it locks the first live waiter's row (a touch in flight is
-- waited for, and its new touched_at read) and grants it a new generation
-- under the next fence (floor raised, request recorded, row deleted) and
-- announces it, naming the waiter, "granted", and the new generation's
-- fence, request id, start and expiry (µs), so that the waiter need not
-- read its lease; with no such waiter (none,
-- one from before this migration, a floor above the new fence, a first
-- term already over) it releases the lease, which the release trigger
-- announces as before.

-- +goose Up
ALTER TABLE fencegate_waiter
    ADD COLUMN request_id text,
    ADD COLUMN term_us    bigint,
    ADD COLUMN touched_at timestamptz;

-- +goose StatementBegin
CREATE FUNCTION fencegate_hand_over(p_resource text, p_holder text, p_fence bigint)
RETURNS TABLE (released boolean, waiter bigint, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, now_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    t      timestamptz;
    w      record;
    v_f    bigint;
    v_fl   bigint;
    v_exp  timestamptz;
    v_sch  text;
BEGIN
    PERFORM 1 FROM fencegate_lease l
     WHERE l.resource = p_resource AND l.holder = p_holder AND l.fence = p_fence
       AND NOT l.released AND l.expires_at > clock_timestamp()
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0::bigint, ''::text, 0::bigint, ''::text, 0::bigint, 0::bigint,
            (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
        RETURN;
    END IF;
    t := clock_timestamp();
    SELECT q.seq, q.holder, q.request_id, q.term_us, q.touched_at, q.expires_at INTO w
      FROM fencegate_waiter q
     WHERE q.resource = p_resource AND q.expires_at > t
     ORDER BY q.seq LIMIT 1
       FOR UPDATE;
    IF FOUND AND w.request_id IS NOT NULL AND w.touched_at IS NOT NULL THEN
        v_exp := LEAST(w.touched_at + w.term_us * interval '1 microsecond', w.expires_at);
        IF v_exp > clock_timestamp() THEN
            v_f := nextval('fencegate_fence_seq');
            SELECT f.floor INTO v_fl FROM fencegate_floor f WHERE f.resource = p_resource FOR UPDATE;
            IF v_fl IS NULL OR v_fl <= v_f THEN
                UPDATE fencegate_lease l SET holder = w.holder, fence = v_f, request_id = w.request_id,
                       granted_at = w.touched_at, expires_at = v_exp, released = false
                 WHERE l.resource = p_resource;
                PERFORM fencegate_fence(p_resource, v_f, w.holder, false, false);
                INSERT INTO fencegate_request (resource, request_id, fence)
                VALUES (p_resource, w.request_id, v_f) ON CONFLICT DO NOTHING;
                DELETE FROM fencegate_waiter q WHERE q.seq = w.seq;
                SELECT n.nspname INTO v_sch FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = 'fencegate_lease'::regclass;
                PERFORM pg_notify('fencegate_lease', concat_ws(chr(31), p_resource, w.seq::text, v_sch, 'granted',
                    v_f::text, w.request_id, (extract(epoch FROM w.touched_at) * 1000000)::bigint::text,
                    (extract(epoch FROM v_exp) * 1000000)::bigint::text));
                RETURN QUERY SELECT true, w.seq, w.holder, v_f, w.request_id,
                    (extract(epoch FROM w.touched_at) * 1000000)::bigint,
                    (extract(epoch FROM v_exp) * 1000000)::bigint,
                    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
                RETURN;
            END IF;
        END IF;
    END IF;
    UPDATE fencegate_lease l SET released = true, expires_at = LEAST(l.expires_at, clock_timestamp())
     WHERE l.resource = p_resource;
    RETURN QUERY SELECT true, 0::bigint, ''::text, 0::bigint, ''::text, 0::bigint, 0::bigint,
        (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_hand_over(text, text, bigint);
ALTER TABLE fencegate_waiter DROP COLUMN request_id, DROP COLUMN term_us, DROP COLUMN touched_at;
