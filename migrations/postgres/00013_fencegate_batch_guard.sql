-- fencegate_fence_batch and fencegate_batch_release put a fenced pipeline
-- (pgxv5.CommitBatch) under the write guard of migration 00004, so that a
-- batch that ends its own transaction cannot commit the caller's writes:
--
--   fencegate_fence_batch   first in the pipeline: checks that it runs in
--                           the outermost transaction (a savepoint's refusal
--                           would roll back only the savepoint), arms the
--                           guard (a row of fencegate_write_guard, whose
--                           deferred trigger fails any COMMIT until the
--                           transaction's write key is set) and runs the
--                           strict fence;
--   fencegate_batch_release last, after the caller's statements: fails
--                           unless the guard armed in this transaction is
--                           still there, then sets the write key so that
--                           the transaction's COMMIT goes through.
--
-- A COMMIT (END, COMMIT AND CHAIN, PREPARE TRANSACTION) among the caller's
-- statements fires the guard: FG003, the transaction rolls back and the
-- pipeline skips the rest. A ROLLBACK (ABORT) among them takes the guard
-- with it, so the release fails (FG004) and rolls back what ran after it.
-- Procedures and DO blocks cannot end a transaction block at all.
--
-- One guard row serves every batch of one transaction (pgxv5.CommitBatch
-- given a pgx.Tx may run several): its key is kept in the transaction-local
-- setting fencegate.batch_key, and each batch clears the write key again
-- until its own release. Each batch rewrites the row, so that its xmin tells
-- whether this batch runs in a subtransaction (FG005).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION fencegate_fence_batch(p_resource text, p_fence bigint, p_holder text, p_verify boolean, p_key text)
RETURNS bigint LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key   text := coalesce(nullif(current_setting('fencegate.batch_key', true), ''), p_key);
    v_xmin  xid;
    v_floor bigint;
BEGIN
    INSERT INTO fencegate_write_guard AS g (key_hash) VALUES (sha256(convert_to(v_key, 'UTF8')))
    ON CONFLICT (key_hash) DO UPDATE SET key_hash = g.key_hash
    RETURNING xmin INTO v_xmin;
    IF v_xmin <> pg_current_xact_id()::xid THEN
        RAISE EXCEPTION 'fencegate: a fenced batch cannot run in a savepoint; pass the outermost transaction'
            USING ERRCODE = 'FG005';
    END IF;
    PERFORM set_config('fencegate.batch_key', v_key, true), set_config('fencegate.write_key', '', true);
    SELECT f.floor INTO v_floor FROM fencegate_fence(p_resource, p_fence, p_holder, p_verify, true) f;
    RETURN v_floor;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION fencegate_batch_release() RETURNS void LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_key text := coalesce(current_setting('fencegate.batch_key', true), '');
BEGIN
    IF v_key = '' OR NOT EXISTS (SELECT 1 FROM fencegate_write_guard WHERE key_hash = sha256(convert_to(v_key, 'UTF8'))) THEN
        RAISE EXCEPTION 'fencegate: the fenced batch ended its transaction before its end (ROLLBACK or the like); what ran after that was rolled back'
            USING ERRCODE = 'FG004';
    END IF;
    PERFORM set_config('fencegate.write_key', v_key, true);
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_batch_release();
DROP FUNCTION fencegate_fence_batch(text, bigint, text, boolean, text);
