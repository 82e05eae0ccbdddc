-- fencegate_acquire_turn is the acquisition of a waiter whose turn has come
-- (lease.Coordinator.AcquireWait): fencegate_grant (p_fast) or
-- fencegate_acquire, and, when that grants the lease (or answers the live
-- lease this very request made), the waiter's place p_waiter taken out of
-- the queue in the same transaction. The queue then never shows a granted
-- waiter ahead of the next one: the holder's release, which may follow at
-- once, names the next waiter first, and no round trip after the grant is
-- left on the hand-over's path. The delete's own trigger
-- (fencegate_waiter_left) announces nothing, since the lease is live.
--
-- Errors are the called function's: FG004 (or 23505) from the fast path
-- rolls the whole statement back, the waiter's place with it, and the
-- caller asks again with p_fast false. Same columns and statuses as
-- fencegate_acquire.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire_turn(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint,
                                       p_lock_timeout text, p_waiter bigint, p_fast boolean)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r record;
BEGIN
    IF p_fast THEN
        SELECT * INTO STRICT r FROM fencegate_grant(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    ELSE
        SELECT * INTO STRICT r FROM fencegate_acquire(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    END IF;
    IF r.status IN ('granted', 'retried') THEN
        DELETE FROM fencegate_waiter AS w WHERE w.seq = p_waiter;
    END IF;
    RETURN QUERY SELECT r.status, r.resource, r.holder, r.fence, r.request_id, r.granted_us, r.expires_us,
        r.released, r.now_us, r.r_fence, r.r_floor, r.r_floor_holder;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_acquire_turn(text, text, text, bigint, text, bigint, boolean);
