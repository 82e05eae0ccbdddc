-- fencegate_write_guard makes a confined write's transaction (fencegate gate,
-- the MCP write tool: internal/confined) impossible to end from the SQL it
-- runs. The write inserts a row keyed by the hash of a random key; the
-- deferred constraint trigger below fires when the transaction ends and
-- raises FG003 unless the transaction-local setting fencegate.write_key holds
-- that key, which the write sets only just before its own COMMIT. So a
-- COMMIT, END or PREPARE TRANSACTION in the user's SQL rolls everything back
-- instead. ENABLE ALWAYS keeps it firing under session_replication_role.

-- +goose Up
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

-- +goose Down
DROP TABLE fencegate_write_guard;
DROP FUNCTION fencegate_write_guard_check();
