-- fencegate_grant is the lease coordinator's acquisition on its own (the
-- Store's Executor, autocommit) with a fast path for the usual case: the
-- resource's lease row exists and is free (released or expired). There a
-- single UPDATE locks the row, checks it is free, takes the next fence and
-- writes the new generation; a plain INSERT records the request and a
-- plain UPDATE raises the floor. fencegate_acquire (00006) first locks the
-- row (a row lock is a WAL record of its own), reads the request table,
-- locks the floor row and then upserts it (an upsert locks before it
-- updates, another record): seven statements and nine WAL records where
-- this takes three statements and four.
--
-- Anything else (no lease row yet, a live lease, a retry) is
-- fencegate_acquire's, called from here in the same statement. The two
-- things the fast path can only find out after writing, a request id that
-- already made a generation (a late retry of a lease now over) and a floor
-- at or above the new fence, raise SQLSTATE FG004: the statement's whole
-- transaction rolls back, nothing is written, and the caller runs
-- fencegate_acquire, which checks before it writes and answers
-- request_expired or floor_ahead. FG004 ends the caller's transaction, so
-- fencegate_grant is only for a statement on its own; in a transaction the
-- coordinator calls fencegate_acquire.
--
-- Row order is fencegate_acquire's: the lease row, then the floor row.
-- Waits stay bounded by p_lock_timeout. The UPDATE takes the fence and the
-- clock after the lease row's lock: when the row changed while it waited,
-- Postgres re-evaluates the WHERE and the new values against the newest
-- row (EvalPlanQual). The clock is read in a subquery correlated with the
-- row (its WHERE names l.resource) so that it is read again there; an
-- uncorrelated one is an InitPlan, read once before the wait, which dated
-- a grant before the end of the lease it replaced (the reliability suite's
-- granted-while-live). When the lock was only held, not changed, the values
-- computed before the wait stand: the row was free then, and the grant is
-- dated (and so expires) earlier than its commit, a shorter lease, never a
-- longer one.
--
-- Same columns and statuses as fencegate_acquire.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_grant(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_fence   bigint;
    v_granted timestamptz;
    v_expires timestamptz;
BEGIN
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    UPDATE fencegate_lease AS l
       SET holder = p_holder, fence = nextval('fencegate_fence_seq'), request_id = p_request_id,
           (granted_at, expires_at) = (SELECT t, t + p_ttl_us * interval '1 microsecond'
                                         FROM clock_timestamp() AS t WHERE l.resource IS NOT NULL),
           released = false
     WHERE l.resource = p_resource AND (l.released OR l.expires_at <= clock_timestamp())
    RETURNING l.fence, l.granted_at, l.expires_at INTO v_fence, v_granted, v_expires;
    IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM fencegate_acquire(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
        RETURN;
    END IF;
    -- A plain INSERT: a request id that already made a generation fails
    -- it with unique_violation (23505), which the caller reads as FG004.
    INSERT INTO fencegate_request (resource, request_id, fence) VALUES (p_resource, p_request_id, v_fence);
    -- Co-located mode: raise the gate's floor in this transaction, so the
    -- grant and the refusal of every older fence commit together.
    UPDATE fencegate_floor AS f SET floor = v_fence, holder = p_holder, updated_at = clock_timestamp()
     WHERE f.resource = p_resource AND f.floor < v_fence;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencegate: %: no floor below the new fence %', p_resource, v_fence
            USING ERRCODE = 'FG004';
    END IF;
    RETURN QUERY SELECT 'granted', p_resource, p_holder, v_fence, p_request_id,
        (extract(epoch FROM v_granted) * 1000000)::bigint, (extract(epoch FROM v_expires) * 1000000)::bigint,
        false, (extract(epoch FROM v_granted) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_grant(text, text, text, bigint, text);
