-- fencegate_refuse raises the error that ends a pipelined fenced write
-- (gate.CommitBatch): the fence statement calls it when the gate refuses the
-- token, and Postgres then skips, and rolls back, everything after it in the
-- pipeline. The SQLSTATEs are fencegate's own: FG001 stale fence, FG002
-- fence never issued. DETAIL carries the floor, HINT the floor's holder.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_refuse(p_resource text, p_holder text, p_fence bigint, p_floor bigint, p_floor_holder text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_floor IS NULL THEN
        RAISE EXCEPTION 'fencegate: %: fence % was never issued to %', p_resource, p_fence, p_holder
            USING ERRCODE = 'FG002';
    END IF;
    RAISE EXCEPTION 'fencegate: %: stale fence % from % is below floor % from %',
        p_resource, p_fence, p_holder, p_floor, p_floor_holder
        USING ERRCODE = 'FG001', DETAIL = p_floor::text, HINT = p_floor_holder;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_refuse(text, text, bigint, bigint, text);
