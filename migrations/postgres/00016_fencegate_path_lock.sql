-- Path claims (gate.PathResource): a claim of a path takes its lock
-- exclusively and the locks of the directories above it shared; a write
-- to a file takes the locks of the directories above it shared and reads
-- their floors. Two claims that overlap therefore queue on the shallower
-- path's lock, siblings never wait on each other, and a directory's claim
-- waits for the writes below it in flight (lease's and gate's docs, Paths).
-- A row per path ever locked; the rows hold nothing but the lock.

-- +goose Up
CREATE TABLE fencegate_path_lock (
    resource text PRIMARY KEY
);

-- Exclusive writes the row (a new version), so that a REPEATABLE READ
-- writer that locks it after the claim committed fails to serialize rather
-- than read floors from before the grant. Shared creates the row if
-- missing, then locks it in a statement of its own: in one statement the
-- lock would miss a row a concurrent claim inserted and committed while
-- the insert waited on it.
-- +goose StatementBegin
CREATE FUNCTION fencegate_path_lock(p_resource text, p_exclusive boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_exclusive THEN
        INSERT INTO fencegate_path_lock (resource) VALUES (p_resource)
            ON CONFLICT (resource) DO UPDATE SET resource = EXCLUDED.resource;
    ELSE
        INSERT INTO fencegate_path_lock (resource) VALUES (p_resource)
            ON CONFLICT (resource) DO NOTHING;
        PERFORM 1 FROM fencegate_path_lock WHERE resource = p_resource FOR SHARE;
    END IF;
END
$$;
-- +goose StatementEnd

-- A directory's claim looks for live leases below it by a byte-wise range
-- (~>=~, ~<~), which this index serves whatever the database's collation.
CREATE INDEX fencegate_lease_resource_pattern ON fencegate_lease (resource text_pattern_ops);

-- +goose Down
DROP INDEX fencegate_lease_resource_pattern;
DROP FUNCTION fencegate_path_lock(text, boolean);
DROP TABLE fencegate_path_lock;
