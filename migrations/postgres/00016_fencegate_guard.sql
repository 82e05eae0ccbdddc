-- Guarded tables (package guard, `fencegate guard`): a guarded table's
-- trigger refuses a row written by a transaction that has not passed the
-- fence for the row's resource. The proof is the resource's fencegate_floor
-- row, which passing the fence leaves marked with this very transaction:
--
--   raised  the GREATEST upsert, when it admits, sets pass_xid to this
--           transaction's 64-bit id (pg_current_xact_id), which no later
--           transaction can have;
--   held    a fence equal to the floor locks the row FOR NO KEY UPDATE, so
--           the row's xmax is this transaction's id until it ends (no other
--           transaction can hold that lock meanwhile, and a finished
--           locker's xmax is cleared by vacuum long before its 32-bit id
--           could come round again), while its xmin is an earlier
--           transaction's.
--
-- A refused fence's upsert rewrites the row too (xmin ours) and carries its
-- lock over to the new version (xmax ours), but leaves pass_xid alone: hence
-- "pass_xid ours, or xmax ours and xmin not". (A frozen row keeps its raw
-- xmin, which a transaction 2^32 ids later would match: that could only
-- refuse a held fence, never pass a write.) A writer cannot make the check
-- true without running the fence or holding UPDATE on fencegate_floor (a
-- lock needs UPDATE too), and no session setting plays a part.
--
-- fencegate_guard_refuse is what a guard trigger calls when the check fails:
-- it lets an operator through (the one hole: the session setting
-- fencegate.guard_bypass = 'on' AND the privilege to UPDATE fencegate_floor,
-- with which a pass could be faked anyway), logging the bypass in
-- fencegate_guard_bypass in the same transaction; anything else raises
-- SQLSTATE FG006 naming the table, the resource and the reason (no fence in
-- this transaction, or a stale one: the transaction rewrote the floor row
-- without being admitted), and logs a WARNING in the server log first
-- (Postgres has no autonomous transaction, so a refusing trigger cannot
-- leave a row in fencegate_rejection). Its search_path is fixed at
-- creation: the caller's could otherwise shadow fencegate_floor with a
-- temporary table of its own.
--
-- The per-table trigger functions are made by the guard package (their SQL
-- names the schema of fencegate_floor); TRUNCATE, which fires no row
-- trigger, is refused by fencegate_guard_truncate.

-- +goose Up
ALTER TABLE fencegate_floor ADD COLUMN pass_xid xid8;

CREATE TABLE fencegate_guard_bypass (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    table_name text        NOT NULL,
    op         text        NOT NULL,
    resource   text,
    role_name  text        NOT NULL,
    xid        xid8        NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fencegate_fence(p_resource text, p_fence bigint, p_holder text, p_verify boolean, p_strict boolean)
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
        -- pass_xid: the proof for a guarded table that this transaction
        -- was admitted (a refused fence rewrites the row, but not it).
        IF p_verify THEN
            INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at, pass_xid)
            SELECT l.resource, l.fence, l.holder, clock_timestamp(), pg_current_xact_id() FROM fencegate_lease l
             WHERE l.resource = p_resource AND l.fence = p_fence AND l.holder = p_holder
            ON CONFLICT (resource) DO UPDATE SET
              floor      = GREATEST(f.floor, excluded.floor),
              holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
              updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END,
              pass_xid   = CASE WHEN excluded.floor >= f.floor THEN excluded.pass_xid ELSE f.pass_xid END
            RETURNING f.floor, f.holder INTO v_floor, v_holder;
        ELSE
            INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at, pass_xid)
            VALUES (p_resource, p_fence, p_holder, clock_timestamp(), pg_current_xact_id())
            ON CONFLICT (resource) DO UPDATE SET
              floor      = GREATEST(f.floor, excluded.floor),
              holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
              updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END,
              pass_xid   = CASE WHEN excluded.floor >= f.floor THEN excluded.pass_xid ELSE f.pass_xid END
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

-- +goose StatementBegin
CREATE FUNCTION fencegate_guard_refuse(p_table text, p_op text, p_resource text)
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
DECLARE
    v_x      xid8 := pg_current_xact_id();
    v_floor  bigint;
    v_holder text;
    v_xmin   xid;
BEGIN
    IF coalesce(current_setting('fencegate.guard_bypass', true), '') = 'on'
       AND has_table_privilege(current_user, 'fencegate_floor'::regclass, 'UPDATE') THEN
        INSERT INTO fencegate_guard_bypass (table_name, op, resource, role_name, xid)
        VALUES (p_table, p_op, p_resource, current_user, v_x);
        RAISE LOG 'fencegate: guard bypassed by %: % on % (resource %)', current_user, p_op, p_table, p_resource;
        RETURN;
    END IF;
    -- The transaction rewrote the floor row without being admitted: it ran
    -- the fence with a stale token (xmin only names the culprit here).
    SELECT f.floor, f.holder, f.xmin INTO v_floor, v_holder, v_xmin FROM fencegate_floor f WHERE f.resource = p_resource;
    IF FOUND AND v_xmin = v_x::xid THEN
        RAISE WARNING 'fencegate: guarded table %: % refused for resource %: the fence in this transaction is stale (floor % from %)',
            p_table, p_op, p_resource, v_floor, v_holder;
        RAISE EXCEPTION 'fencegate: guarded table %: % refused for resource %: the fence in this transaction is stale (floor % from %)',
            p_table, p_op, p_resource, v_floor, v_holder
            USING ERRCODE = 'FG006', TABLE = p_table, DETAIL = 'stale';
    END IF;
    RAISE WARNING 'fencegate: guarded table %: % refused for resource %: no fence in this transaction',
        p_table, p_op, coalesce(p_resource, 'NULL');
    RAISE EXCEPTION 'fencegate: guarded table %: % refused for resource %: no fence in this transaction',
        p_table, p_op, coalesce(p_resource, 'NULL')
        USING ERRCODE = 'FG006', TABLE = p_table, DETAIL = 'no fence',
              HINT = 'write through gate.Commit (or Do, BeginFenced, CommitBatch, fencegate gate) with a token for this resource';
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION fencegate_guard_truncate() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM fencegate_guard_refuse_truncate(TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION fencegate_guard_refuse_truncate(p_table text) RETURNS void LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM fencegate_guard_refuse(p_table, 'TRUNCATE', NULL);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_guard_truncate();
DROP FUNCTION fencegate_guard_refuse_truncate(text);
DROP FUNCTION fencegate_guard_refuse(text, text, text);
DROP TABLE fencegate_guard_bypass;
-- The 00007 form, without pass_xid.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fencegate_fence(p_resource text, p_fence bigint, p_holder text, p_verify boolean, p_strict boolean)
RETURNS TABLE (floor bigint, holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_floor  bigint;
    v_holder text;
BEGIN
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
    IF v_floor IS NULL THEN
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
ALTER TABLE fencegate_floor DROP COLUMN pass_xid;
