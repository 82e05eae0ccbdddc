-- fencegate schema for Postgres, guarded tables (package guard, `fencegate
-- guard`): a guarded table's trigger refuses a row written by a transaction
-- that has not passed the fence for the row's resource. The proof is the
-- resource's fencegate_floor row, which passing the fence leaves marked
-- with this very transaction:
--
--   raised  a write that raises the floor or hands it to another holder at
--           the same fence (fencegate_fence's upsert, a lease grant, Admit)
--           has the trigger fencegate_floor_pass set pass_xid to this
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
-- lock over to the new version (xmax ours), but changes neither floor nor
-- holder, so the trigger leaves pass_xid as it was: hence
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
-- leave a row in fencegate_rejection). It is given fencegate's schema by
-- the trigger and names every table through it, under a fixed search_path
-- (pg_catalog first, pg_temp last): the caller's could otherwise shadow
-- fencegate_floor with a temporary table of its own, on which it has every
-- privilege, or has_table_privilege with a function of its own.
--
-- The per-table trigger functions are made by the guard package (their SQL
-- names the schema of fencegate_floor); TRUNCATE, which fires no row
-- trigger, is refused by fencegate_guard_truncate.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_floor_pass() RETURNS trigger LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' OR NEW.floor OPERATOR(pg_catalog.>) OLD.floor
       OR NEW.holder OPERATOR(pg_catalog.<>) OLD.holder THEN
        NEW.pass_xid := pg_catalog.pg_current_xact_id();
    ELSE
        NEW.pass_xid := OLD.pass_xid; -- nobody passes by rewriting a floor unchanged
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER fencegate_floor_pass BEFORE INSERT OR UPDATE ON fencegate_floor
    FOR EACH ROW EXECUTE FUNCTION fencegate_floor_pass();
ALTER TABLE fencegate_floor ENABLE ALWAYS TRIGGER fencegate_floor_pass;

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
CREATE FUNCTION fencegate_guard_refuse(p_schema text, p_table text, p_op text, p_resource text)
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_x      xid8 := pg_current_xact_id();
    v_floor  bigint;
    v_holder text;
    v_xmin   xid;
BEGIN
    IF coalesce(current_setting('fencegate.guard_bypass', true), '') = 'on'
       AND has_table_privilege(current_user, format('%I.fencegate_floor', p_schema), 'UPDATE') THEN
        EXECUTE format('INSERT INTO %I.fencegate_guard_bypass (table_name, op, resource, role_name, xid) VALUES ($1, $2, $3, $4, $5)', p_schema)
            USING p_table, p_op, p_resource, current_user, v_x;
        RAISE LOG 'fencegate: guard bypassed by %: % on % (resource %)', current_user, p_op, p_table, p_resource;
        RETURN;
    END IF;
    -- The transaction rewrote the floor row without being admitted: it ran
    -- the fence with a stale token (xmin only names the culprit here).
    EXECUTE format('SELECT f.floor, f.holder, f.xmin FROM %I.fencegate_floor f WHERE f.resource = $1', p_schema)
        INTO v_floor, v_holder, v_xmin USING p_resource;
    IF v_xmin = v_x::xid THEN
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

-- TG_ARGV[0] is fencegate's schema, TG_ARGV[1] the table's name.
-- +goose StatementBegin
CREATE FUNCTION fencegate_guard_truncate() RETURNS trigger LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    EXECUTE format('SELECT %I.fencegate_guard_refuse($1, $2, $3, NULL)', TG_ARGV[0]) USING TG_ARGV[0], TG_ARGV[1], 'TRUNCATE';
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_guard_truncate();
DROP FUNCTION fencegate_guard_refuse(text, text, text, text);
DROP TABLE fencegate_guard_bypass;
DROP TRIGGER fencegate_floor_pass ON fencegate_floor;
DROP FUNCTION fencegate_floor_pass();
