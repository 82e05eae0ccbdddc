-- fencegate_acquire answers two cases truly that 00006's answered
-- request_expired while the request's lease was live:
--
--   * A copy of a request whose locking read found no lease row, because a
--     concurrent copy's first grant had not committed yet, and whose read
--     of the request table then found that grant's record, committed
--     meanwhile: each statement of a READ COMMITTED transaction reads anew.
--     Retries after a lost reply were told to give up a lease they hold.
--   * Another holder sending the request id of a live lease: not its
--     lease, and not over either. It is held, by the lease's holder.
--
-- 00006's function keeps its steps under the name fencegate_acquire_steps,
-- and fencegate_acquire calls it: where it answers request_expired, the
-- lease row is locked and read again, and when it is live and was made by
-- this request id the answer is retried (the requester holds it) or held
-- (another holder does). Otherwise request_expired stands. The row is the
-- steps' locked row, or one created and committed since their read. The
-- callers (fencegate_grant, fencegate_acquire_turn, the coordinator) are
-- unchanged. Same arguments, columns and statuses as 00006's.

-- +goose Up
ALTER FUNCTION fencegate_acquire(text, text, text, bigint, text) RENAME TO fencegate_acquire_steps;

-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    r       record;
    l       fencegate_lease%ROWTYPE;
    found_l boolean;
    t       timestamptz;
BEGIN
    SELECT * INTO STRICT r FROM fencegate_acquire_steps(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    IF r.status = 'request_expired' THEN
        SELECT * INTO l FROM fencegate_lease WHERE fencegate_lease.resource = p_resource FOR UPDATE;
        found_l := FOUND;
        t := clock_timestamp(); -- after any wait for the lock
        IF found_l AND NOT l.released AND l.expires_at > t AND l.request_id = p_request_id THEN
            RETURN QUERY SELECT CASE WHEN l.holder = p_holder THEN 'retried' ELSE 'held' END,
                l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT r.status, r.resource, r.holder, r.fence, r.request_id, r.granted_us, r.expires_us,
        r.released, r.now_us, r.r_fence, r.r_floor, r.r_floor_holder;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_acquire(text, text, text, bigint, text);
ALTER FUNCTION fencegate_acquire_steps(text, text, text, bigint, text) RENAME TO fencegate_acquire;
