-- riverfence: the floor of a River job's resource rises in the transaction
-- that hands the job to a new attempt (River's fetch raises river_job.attempt),
-- so an older attempt's fenced commit is refused from that instant.
-- Needs fencegate's Postgres migrations (fencegate_fence) and River's
-- (river_job); run it with the search_path that finds both, which the
-- function keeps (SET search_path FROM CURRENT) whoever fires the trigger.

-- +goose Up
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION riverfence_raise_floor() RETURNS trigger
LANGUAGE plpgsql VOLATILE SET search_path FROM CURRENT AS $$
BEGIN
    -- fencegate's own rule (GREATEST upsert), not strict: a floor already
    -- above this attempt (River lowered attempt, e.g. a snooze) stays.
    PERFORM fencegate_fence('river_job:' || NEW.id, NEW.attempt::bigint, 'river attempt ' || NEW.attempt, false, false);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE TRIGGER riverfence_attempt
    AFTER UPDATE OF attempt ON river_job
    FOR EACH ROW WHEN (NEW.attempt > OLD.attempt)
    EXECUTE FUNCTION riverfence_raise_floor();

-- +goose Down
DROP TRIGGER IF EXISTS riverfence_attempt ON river_job;
DROP FUNCTION IF EXISTS riverfence_raise_floor();
