-- fencegate_fence is the gate's floor statement (Executor.FloorRaise) as a
-- function, so that its plans are cached in the server session whatever the
-- client's protocol: with pgx's exec or simple protocol modes (what a
-- transaction pooler such as PgBouncer needs), the statement text is parsed
-- and planned on every call, and a function call is short to parse, where
-- the floor CTE it replaces took longer to plan than to run. It keeps the
-- CTE's two paths, in the statement's transaction:
--
--   held    a fence equal to the floor, from the holder that set it, only
--           locks the floor row (FOR NO KEY UPDATE: no new row version);
--   raised  anything else takes the GREATEST upsert, which writes
--           max(floor, fence) and locks the row.
--
-- It returns the floor and its holder after the statement (admitted when
-- the floor is p_fence); with p_verify it touches the floor only for a lease
-- (p_resource, p_holder, p_fence) and returns no row when there is none.
-- With p_strict it admits or fails: a refusal calls fencegate_refuse, which
-- raises FG001 (stale) or FG002 (never issued), so that, sent in a pipeline
-- or after BEGIN, nothing after it runs and nothing commits.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_fence(p_resource text, p_fence bigint, p_holder text, p_verify boolean, p_strict boolean)
RETURNS TABLE (floor bigint, holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_floor  bigint;
    v_holder text;
BEGIN
    -- If this waits on a raise that commits, READ COMMITTED re-checks the
    -- WHERE against the new row, finds floor <> fence and returns nothing;
    -- the upsert then reports the higher floor.
    IF p_verify THEN
        SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
         WHERE f.resource = p_resource AND f.floor = p_fence AND f.holder = p_holder
           AND EXISTS (SELECT 1 FROM fencegate_lease l
                        WHERE l.resource = p_resource AND l.fence = p_fence AND l.holder = p_holder)
           FOR NO KEY UPDATE OF f;
    ELSE
        SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
         WHERE f.resource = p_resource AND f.floor = p_fence AND f.holder = p_holder
           FOR NO KEY UPDATE OF f;
    END IF;
    IF NOT FOUND THEN
        IF p_verify THEN
            INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
            SELECT l.resource, l.fence, l.holder, clock_timestamp() FROM fencegate_lease l
             WHERE l.resource = p_resource AND l.fence = p_fence AND l.holder = p_holder
            ON CONFLICT (resource) DO UPDATE SET
              floor      = GREATEST(f.floor, excluded.floor),
              holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
              updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
            RETURNING f.floor, f.holder INTO v_floor, v_holder;
        ELSE
            INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
            VALUES (p_resource, p_fence, p_holder, clock_timestamp())
            ON CONFLICT (resource) DO UPDATE SET
              floor      = GREATEST(f.floor, excluded.floor),
              holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
              updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
            RETURNING f.floor, f.holder INTO v_floor, v_holder;
        END IF;
    END IF;
    IF v_floor IS NULL THEN -- p_verify found no such lease: nothing was written
        IF p_strict THEN
            PERFORM fencegate_refuse(p_resource, p_holder, p_fence, NULL, NULL);
        END IF;
        RETURN;
    END IF;
    IF p_strict AND v_floor <> p_fence THEN
        PERFORM fencegate_refuse(p_resource, p_holder, p_fence, v_floor, v_holder);
    END IF;
    floor := v_floor;
    holder := v_holder;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_fence(text, bigint, text, boolean, boolean);
