-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
--
-- The triggers announce every lease change a waiter cares about on the
-- channel fencegate_lease, with the resource as the payload: a release, a
-- new generation (a grant), and a waiter leaving the queue. A renewal, which
-- only moves expires_at, announces nothing. NOTIFY is delivered at commit,
-- and a release by a stale token updates no row, so it announces nothing.

-- +goose Up
CREATE TABLE fencegate_waiter (
    seq        bigserial   PRIMARY KEY,
    resource   text        NOT NULL,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- +goose StatementBegin
CREATE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('fencegate_lease', OLD.resource);
    ELSE
        PERFORM pg_notify('fencegate_lease', NEW.resource);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER fencegate_lease_granted AFTER INSERT ON fencegate_lease
    FOR EACH ROW EXECUTE FUNCTION fencegate_lease_notify();
CREATE TRIGGER fencegate_lease_changed AFTER UPDATE ON fencegate_lease
    FOR EACH ROW WHEN (NEW.released <> OLD.released OR NEW.fence <> OLD.fence)
    EXECUTE FUNCTION fencegate_lease_notify();
CREATE TRIGGER fencegate_waiter_left AFTER DELETE ON fencegate_waiter
    FOR EACH ROW EXECUTE FUNCTION fencegate_lease_notify();

-- +goose Down
DROP TABLE fencegate_waiter;
DROP TRIGGER fencegate_lease_granted ON fencegate_lease;
DROP TRIGGER fencegate_lease_changed ON fencegate_lease;
DROP FUNCTION fencegate_lease_notify();
