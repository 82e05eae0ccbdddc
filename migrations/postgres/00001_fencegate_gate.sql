-- fencegate schema for Postgres, the gate's part: the floors, the
-- rejections, and the functions a fenced write calls (gate.Commit and its
-- pgx forms). Names are prefixed so they never clash with the host
-- application's tables.

-- +goose Up
-- One row per guarded resource; fillfactor leaves room for HOT updates of a
-- hot floor row. pass_xid is the last transaction that raised the floor or
-- handed it to another holder (fencegate_floor_pass, migration 00003).
CREATE TABLE fencegate_floor (
    resource   text        PRIMARY KEY,
    floor      bigint      NOT NULL CHECK (floor > 0),
    holder     text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    pass_xid   xid8
) WITH (fillfactor = 50);

-- Every refusal: the evidence that two holders overlapped.
CREATE TABLE fencegate_rejection (
    seq          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource     text        NOT NULL,
    fence        bigint      NOT NULL,
    holder       text        NOT NULL,
    floor        bigint      NOT NULL,
    floor_holder text        NOT NULL,
    not_issued   boolean     NOT NULL DEFAULT false,
    at           timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX fencegate_rejection_resource_seq ON fencegate_rejection (resource, seq);

-- fencegate_refuse raises the error that ends a pipelined fenced write
-- (gate.CommitBatch): the fence statement calls it when the gate refuses the
-- token, and Postgres then skips, and rolls back, everything after it in the
-- pipeline. The SQLSTATEs are fencegate's own: FG001 stale fence, FG002
-- fence never issued. DETAIL is the JSON object {"resource", "fence",
-- "holder", "floor", "floor_holder"} (the floor's two null for FG002), the
-- SQL protocol's documented refusal (docs/SQL.md, fencegate_check).
-- +goose StatementBegin
CREATE FUNCTION fencegate_refuse(p_resource text, p_holder text, p_fence bigint, p_floor bigint, p_floor_holder text)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_detail text := json_build_object('resource', p_resource, 'fence', p_fence, 'holder', p_holder,
                                       'floor', p_floor, 'floor_holder', p_floor_holder)::text;
BEGIN
    IF p_floor IS NULL THEN
        RAISE EXCEPTION 'fencegate: %: fence % was never issued to %', p_resource, p_fence, p_holder
            USING ERRCODE = 'FG002', DETAIL = v_detail,
                  HINT = 'roll back the transaction; fencegate_log_refusal records the refusal';
    END IF;
    RAISE EXCEPTION 'fencegate: %: stale fence % from % is below floor % from %',
        p_resource, p_fence, p_holder, p_floor, p_floor_holder
        USING ERRCODE = 'FG001', DETAIL = v_detail,
              HINT = 'roll back the transaction; fencegate_log_refusal records the refusal';
END
$$;
-- +goose StatementEnd

-- fencegate_fence is the gate's floor statement (Executor.FloorRaise) as a
-- function, so that its plans are cached in the server session whatever the
-- client's protocol: with pgx's exec or simple protocol modes (what a
-- transaction pooler such as PgBouncer needs), the statement text is parsed
-- and planned on every call, and a function call is short to parse, where
-- a CTE took longer to plan than to run. Its two paths, in the statement's
-- transaction:
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

-- fencegate_write_guard makes a confined write's transaction (fencegate gate,
-- the MCP write tool: internal/confined) impossible to end from the SQL it
-- runs. The write inserts a row keyed by the hash of a random key; the
-- deferred constraint trigger below fires when the transaction ends and
-- raises FG003 unless the transaction-local setting fencegate.write_key holds
-- that key, which the write sets only just before its own COMMIT. So a
-- COMMIT, END or PREPARE TRANSACTION in the user's SQL rolls everything back
-- instead. ENABLE ALWAYS keeps it firing under session_replication_role.
CREATE TABLE fencegate_write_guard (
    key_hash bytea PRIMARY KEY
);

-- +goose StatementBegin
CREATE FUNCTION fencegate_write_guard_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF sha256(convert_to(coalesce(current_setting('fencegate.write_key', true), ''), 'UTF8')) IS DISTINCT FROM NEW.key_hash THEN
        RAISE EXCEPTION 'fencegate: the SQL of a fenced write tried to end its transaction; nothing was committed'
            USING ERRCODE = 'FG003';
    END IF;
    EXECUTE format('DELETE FROM %I.%I WHERE key_hash = $1', TG_TABLE_SCHEMA, TG_TABLE_NAME) USING NEW.key_hash;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER fencegate_write_guard_commit
    AFTER INSERT ON fencegate_write_guard
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION fencegate_write_guard_check();
ALTER TABLE fencegate_write_guard ENABLE ALWAYS TRIGGER fencegate_write_guard_commit;

-- fencegate_fence_batch and fencegate_batch_release put a fenced pipeline
-- (pgxgate.CommitBatch) under a write guard of its own, so that a batch that
-- ends its own transaction cannot commit the caller's writes. The Go side
-- arms it only where it cannot vouch for the batch's statements (a
-- statement it cannot read, or the caller's transaction):
--
--   fencegate_fence_batch   first in the pipeline: arms the guard, a row of
--                           fencegate_batch_guard whose deferred trigger
--                           fails the transaction's COMMIT while the
--                           transaction-local setting fencegate.batch_guard
--                           is set, and whose xmin tells whether it runs in
--                           the outermost transaction (FG005: a savepoint's
--                           refusal would roll back only the savepoint),
--                           sets the setting to the row's ctid, and runs the
--                           strict fence;
--   fencegate_batch_release last, after the caller's statements: deletes
--                           the row by that ctid, failing (FG004) unless it
--                           is still there, and clears the setting, so that
--                           the transaction's COMMIT goes through.
--
-- A COMMIT (END, COMMIT AND CHAIN, PREPARE TRANSACTION) among the caller's
-- statements fires the guard: FG003, the transaction rolls back and the
-- pipeline skips the rest. A ROLLBACK (ABORT) among them takes the row and
-- the setting with it, so the release fails (FG004) and rolls back what ran
-- after it. Procedures and DO blocks cannot end a transaction block at all.
-- Each batch of one transaction (pgxgate.CommitBatch given a pgx.Tx may run
-- several) arms and releases a row of its own.
--
-- The check at COMMIT is one comparison of a setting: the row is deleted
-- by the release (a TID lookup), not by the trigger, and the table is
-- UNLOGGED and has no index, since no row of it outlives its transaction:
-- arming and releasing the guard write no WAL.
CREATE UNLOGGED TABLE fencegate_batch_guard (
    armed boolean NOT NULL DEFAULT true
);

-- +goose StatementBegin
CREATE FUNCTION fencegate_batch_guard_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('fencegate.batch_guard', true), '') <> '' THEN
        RAISE EXCEPTION 'fencegate: the SQL of a fenced write tried to end its transaction; nothing was committed'
            USING ERRCODE = 'FG003';
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER fencegate_batch_guard_commit
    AFTER INSERT ON fencegate_batch_guard
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION fencegate_batch_guard_check();
ALTER TABLE fencegate_batch_guard ENABLE ALWAYS TRIGGER fencegate_batch_guard_commit;

-- +goose StatementBegin
CREATE FUNCTION fencegate_fence_batch(p_resource text, p_fence bigint, p_holder text, p_verify boolean)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_ctid  tid;
    v_xmin  xid;
    v_floor bigint;
BEGIN
    INSERT INTO fencegate_batch_guard DEFAULT VALUES RETURNING ctid, xmin INTO v_ctid, v_xmin;
    IF v_xmin <> pg_current_xact_id()::xid THEN
        RAISE EXCEPTION 'fencegate: a fenced batch cannot run in a savepoint; pass the outermost transaction'
            USING ERRCODE = 'FG005';
    END IF;
    PERFORM set_config('fencegate.batch_guard', v_ctid::text, true);
    SELECT f.floor INTO v_floor FROM fencegate_fence(p_resource, p_fence, p_holder, p_verify, true) f;
    RETURN v_floor;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION fencegate_batch_release() RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_ctid text := coalesce(current_setting('fencegate.batch_guard', true), '');
BEGIN
    IF v_ctid <> '' THEN
        DELETE FROM fencegate_batch_guard WHERE ctid = v_ctid::tid;
        IF FOUND THEN
            PERFORM set_config('fencegate.batch_guard', '', true);
            RETURN;
        END IF;
    END IF;
    RAISE EXCEPTION 'fencegate: the fenced batch ended its transaction before its end (ROLLBACK or the like); what ran after that was rolled back'
        USING ERRCODE = 'FG004';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_batch_release();
DROP FUNCTION fencegate_fence_batch(text, bigint, text, boolean);
DROP TABLE fencegate_batch_guard;
DROP FUNCTION fencegate_batch_guard_check();
DROP TABLE fencegate_write_guard;
DROP FUNCTION fencegate_write_guard_check();
DROP FUNCTION fencegate_fence(text, bigint, text, boolean, boolean);
DROP FUNCTION fencegate_refuse(text, text, bigint, bigint, text);
DROP TABLE fencegate_rejection;
DROP TABLE fencegate_floor;
