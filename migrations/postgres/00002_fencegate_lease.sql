-- fencegate schema for Postgres, the lease coordinator's part: the fence
-- sequence, the leases and the requests that made them, the waiters' queue
-- and its announcements, semaphores, path claims, and the functions that
-- acquire a lease in one statement (sqlstore.LeaseAcquirer) or hand it over.
--
-- Times the functions return are integer microseconds since the Unix epoch.

-- +goose Up
-- CACHE 1: a per-session cache would hand out fences out of order.
CREATE SEQUENCE fencegate_fence_seq AS bigint MINVALUE 1 START 1 CACHE 1 NO CYCLE;

-- The coordinator's current generation per resource.
CREATE TABLE fencegate_lease (
    resource   text        PRIMARY KEY,
    holder     text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence > 0),
    request_id text        NOT NULL,
    granted_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    released   boolean     NOT NULL DEFAULT false,
    -- The fence of a generation whose holder released it having sent its
    -- request once (no copy of it can still arrive): that request needs no
    -- record in fencegate_request when a new generation overwrites the row.
    -- A fence of an older generation says nothing about the current one.
    settled_fence bigint
) WITH (fillfactor = 50);

-- Every acquisition request that made a generation, so that a retry of it
-- arriving after that lease expired or was released is never granted again
-- (it would lock the resource for a holder that gave up on the request).
-- One row per grant. made_at is when the request made its lease (the
-- database's clock, read when the request is recorded, after it was sent),
-- so that lease.Coordinator.Prune can delete the rows no retry can need any
-- more (older than the longest term a request could ask for: the lease's
-- own doc, "Bounded tables", has the proof).
CREATE TABLE fencegate_request (
    resource   text        NOT NULL,
    request_id text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence > 0),
    made_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (resource, request_id)
);

-- fencegate_waiter is the queue of acquisitions waiting for a lease
-- (lease.Coordinator.AcquireWait): a waiter is granted only when it is the
-- first live one of its resource, so waiters in any number of processes are
-- served in the order they queued. A waiter keeps its row live by touching
-- it; one whose process died leaves the queue when its time runs out.
--
-- It is UNLOGGED: its statements write no WAL, so a waiter's joining,
-- touching and leaving commit without waiting for a flush. The queue is an
-- ordering aid, not a safety mechanism: the lease row and the fence decide
-- who may write. A crash empties an unlogged table; waiters then find their
-- places gone and queue again (the order among them is lost once, nothing
-- else), and a standby has no queue until promoted, when the waiters queue
-- again on it the same way.
--
-- A waiter that accepts a hand-over (fencegate_hand_over below) says so in
-- its row: request_id, the acquisition request the grant records and
-- answers, and term_us, the term it asked for. touched_at is the database's
-- clock at the row's last touch (or insert): the waiter anchors a
-- handed-over lease at the instant it sent its last touch that was
-- answered, which came before the touch ran, so dating the term from
-- touched_at keeps the holder's window inside the coordinator's (package
-- lease's doc, "Hand-over", has the proof).
CREATE UNLOGGED TABLE fencegate_waiter (
    seq        bigserial   PRIMARY KEY,
    resource   text        NOT NULL,
    holder     text        NOT NULL,
    expires_at timestamptz NOT NULL,
    request_id text,
    term_us    bigint,
    touched_at timestamptz
);
CREATE INDEX fencegate_waiter_resource ON fencegate_waiter (resource, seq);

-- A listener with no waiter row (such as elect.Elector.Observe, or a
-- semaphore's head of line watching its permits), so that a release it
-- waits for is announced (fencegate_lease_notify). A watcher row belongs to
-- the listening session (pid): the listener deletes it when it stops, and
-- one whose session died is deleted by the next watcher that registers. A
-- stale row costs an announcement nobody hears, never a missed one. The
-- table is UNLOGGED like the waiter queue: a crash takes the listening
-- sessions with it.
CREATE UNLOGGED TABLE fencegate_watcher (
    pid      integer NOT NULL,
    resource text    NOT NULL,
    prefix   boolean NOT NULL,
    PRIMARY KEY (resource, prefix, pid)
);

-- The triggers announce on the channel fencegate_lease the lease changes a
-- waiter cares about: a release, and a waiter leaving the queue. NOTIFY is
-- delivered at commit, and a release by a stale token updates no row, so it
-- announces nothing. A renewal, which only moves expires_at, announces
-- nothing.
--
-- A grant is not announced: an announcing commit holds Postgres's
-- cluster-wide notify lock until it ends, and a grant's commit waits for
-- its WAL flush, so announcing grants would serialize every grant of every
-- resource behind one another's flush. A grant would only make the first
-- waiter look again and find the lease held; without it the first waiter
-- learns the new holder's expiry when its timer fires.
--
-- fencegate_lease_notify names the resource's first live waiter in its
-- announcement, and the schema of the tables, as resource, chr(31), seq (or
-- nothing when no waiter is queued), chr(31), schema (resource names hold no
-- control characters): a listener wakes that waiter only, not the first of
-- its own, and ignores another schema's announcements, whose places are
-- another queue's. A waiter leaving the queue is announced only when it was
-- the first and the lease is not live (a waiter cancelled after a release):
-- after its grant, or behind a live holder, the next waiter has nothing to
-- gain from looking now (the release is announced, and the next waiter
-- finds an expiry by its timer).
--
-- A release is announced only when someone waits for it. Every NOTIFY takes
-- the notify lock at commit and holds it until the commit ends, so
-- announcing every release would serialize all releases of all resources
-- behind one another (Lock:object waits from 16 concurrent acquirers on).
-- So a release is announced only when the resource has a live waiter
-- (fencegate_waiter) or a watcher (fencegate_watcher). With neither, the
-- trigger reads two index ranges and notifies nobody, and the commit takes
-- no notify lock.
--
-- No wake-up is lost by skipping (package lease's doc, "Waiting"):
--   a waiter that queues after the trigger's read touches its place and
--   tries to acquire afterwards, and the acquisition locks the lease row,
--   so it waits for the releasing commit and finds the lease released;
--   a watcher inserts its row (committed), then takes FOR SHARE on the
--   lease row of the resource it watches (which waits for a release in
--   flight: the release's UPDATE holds the row), then LISTENs, then looks:
--   either the trigger's query, which takes a snapshot of its own after the
--   UPDATE, sees the watcher row and announces, or the release committed
--   before the watcher looks. A watcher of a prefix (a semaphore's permits)
--   takes no row lock: what it does on waking is an acquisition of each
--   permit, which locks the row the same way.
-- +goose StatementBegin
CREATE FUNCTION fencegate_lease_notify() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    res   text;
    first bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        res := OLD.resource;
        IF EXISTS (SELECT 1 FROM fencegate_waiter w
                    WHERE w.resource = res AND w.seq < OLD.seq AND w.expires_at > clock_timestamp())
           OR EXISTS (SELECT 1 FROM fencegate_lease l
                       WHERE l.resource = res AND NOT l.released AND l.expires_at > clock_timestamp()) THEN
            RETURN NULL;
        END IF;
    ELSE
        res := NEW.resource;
    END IF;
    SELECT min(w.seq) INTO first FROM fencegate_waiter w
     WHERE w.resource = res AND w.expires_at > clock_timestamp();
    -- The skip's argument needs a snapshot taken after the UPDATE: READ
    -- COMMITTED's, statement by statement. A release in a REPEATABLE READ or
    -- SERIALIZABLE transaction reads the transaction's older snapshot, which
    -- can miss a waiter or watcher that committed since, so it announces.
    IF first IS NULL AND current_setting('transaction_isolation') = 'read committed' AND NOT EXISTS (
        SELECT 1 FROM fencegate_watcher o
         WHERE (o.resource = res AND NOT o.prefix) OR (o.prefix AND starts_with(res, o.resource))) THEN
        RETURN NULL; -- nobody waits: no NOTIFY, no notify lock at commit
    END IF;
    PERFORM pg_notify('fencegate_lease', res || chr(31) || coalesce(first::text, '') || chr(31) || TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER fencegate_lease_released AFTER UPDATE ON fencegate_lease
    FOR EACH ROW WHEN (NEW.released AND NOT OLD.released)
    EXECUTE FUNCTION fencegate_lease_notify();
CREATE TRIGGER fencegate_waiter_left AFTER DELETE ON fencegate_waiter
    FOR EACH ROW EXECUTE FUNCTION fencegate_lease_notify();

-- fencegate_acquire_steps is the lease coordinator's acquisition in one
-- statement, so that an acquisition costs one round trip instead of one per
-- step. It holds the same steps, in the same order, as the coordinator's
-- transaction on a database without it: the lock timeout, the locking read
-- of the lease row, the request-id check, nextval, the lease write with its
-- request record, and the floor raise, all in the transaction of the
-- statement that calls it. Where that transaction rolls back a grant whose
-- floor raise is refused, this one checks the floor before it writes (or
-- deletes the row it just inserted). fencegate_acquire, below, calls it and
-- checks its request_expired answers.
--
-- status is one of:
--   granted          a new generation: the lease columns are it
--   retried          the live lease this very request made: the lease columns
--   held             someone's live lease (the lease columns) blocks the grant
--   request_expired  this request made the lease with fence r_fence, now over
--   floor_ahead      the floor (r_floor, r_floor_holder) is above the new
--                    fence r_fence; nothing was written
-- now_us is the clock after the lock wait (and, for a grant, the grant
-- instant).
-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire_steps(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    l        fencegate_lease%ROWTYPE;
    found_l  boolean;
    live     boolean;
    t        timestamptz;
    v_fence  bigint;
    v_floor  bigint;
    v_holder text;
BEGIN
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    -- Two attempts suffice: an insert that loses the race to a concurrent
    -- first acquisition reads the winner's live lease next time.
    FOR attempt IN 1..3 LOOP
        SELECT * INTO l FROM fencegate_lease WHERE fencegate_lease.resource = p_resource FOR UPDATE;
        found_l := FOUND;
        t := clock_timestamp(); -- after any wait for the lock
        live := found_l AND NOT l.released AND l.expires_at > t;
        IF live AND l.holder = p_holder AND l.request_id = p_request_id THEN
            RETURN QUERY SELECT 'retried', l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;
        -- The row's own generation, over, was this request's: the row is
        -- its record until a new generation overwrites it.
        IF found_l AND NOT live AND l.request_id = p_request_id THEN
            RETURN QUERY SELECT 'request_expired', p_resource, p_holder, 0::bigint, p_request_id,
                0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, l.fence, 0::bigint, ''::text;
            RETURN;
        END IF;
        SELECT r.fence INTO v_fence FROM fencegate_request r
         WHERE r.resource = p_resource AND r.request_id = p_request_id;
        IF FOUND THEN
            RETURN QUERY SELECT 'request_expired', p_resource, p_holder, 0::bigint, p_request_id,
                0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, 0::bigint, ''::text;
            RETURN;
        END IF;
        IF live THEN
            RETURN QUERY SELECT 'held', l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;

        -- Free (never leased, expired or released): a new generation,
        -- unless the floor is above its fence. The floor is checked (and
        -- locked) once the lease row is this transaction's: a row locked
        -- above, or one just inserted (a first acquisition that loses the
        -- insert to a concurrent one reads the winner's lease instead).
        v_fence := nextval('fencegate_fence_seq');
        t := clock_timestamp();
        IF found_l THEN
            SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
             WHERE f.resource = p_resource FOR NO KEY UPDATE;
            IF FOUND AND v_floor > v_fence THEN
                RETURN QUERY SELECT 'floor_ahead', p_resource, p_holder, 0::bigint, p_request_id,
                    0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, v_floor, v_holder;
                RETURN;
            END IF;
            -- The generation overwritten leaves its request in the log,
            -- unless its holder settled it (settled_fence).
            IF l.settled_fence IS DISTINCT FROM l.fence THEN
                INSERT INTO fencegate_request (resource, request_id, fence) VALUES (p_resource, l.request_id, l.fence)
                ON CONFLICT ON CONSTRAINT fencegate_request_pkey DO NOTHING;
            END IF;
            UPDATE fencegate_lease SET holder = p_holder, fence = v_fence, request_id = p_request_id,
                   granted_at = t, expires_at = t + p_ttl_us * interval '1 microsecond', released = false
             WHERE fencegate_lease.resource = p_resource;
        ELSE
            INSERT INTO fencegate_lease AS n (resource, holder, fence, request_id, granted_at, expires_at, released)
            VALUES (p_resource, p_holder, v_fence, p_request_id, t, t + p_ttl_us * interval '1 microsecond', false)
            ON CONFLICT ON CONSTRAINT fencegate_lease_pkey DO NOTHING;
            IF NOT FOUND THEN
                CONTINUE; -- a concurrent first acquisition created the row: read it
            END IF;
            SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f
             WHERE f.resource = p_resource FOR NO KEY UPDATE;
            IF FOUND AND v_floor > v_fence THEN
                DELETE FROM fencegate_lease WHERE fencegate_lease.resource = p_resource; -- this transaction's own row
                RETURN QUERY SELECT 'floor_ahead', p_resource, p_holder, 0::bigint, p_request_id,
                    0::bigint, 0::bigint, false, (extract(epoch FROM t) * 1000000)::bigint, v_fence, v_floor, v_holder;
                RETURN;
            END IF;
        END IF;
        -- Co-located mode: raise the gate's floor in this transaction, so
        -- the grant and the refusal of every older fence commit together.
        INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
        VALUES (p_resource, v_fence, p_holder, clock_timestamp())
        ON CONFLICT ON CONSTRAINT fencegate_floor_pkey DO UPDATE SET
            floor = GREATEST(f.floor, excluded.floor),
            holder = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
            updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END;

        RETURN QUERY SELECT 'granted', p_resource, p_holder, v_fence, p_request_id,
            (extract(epoch FROM t) * 1000000)::bigint,
            (extract(epoch FROM t + p_ttl_us * interval '1 microsecond') * 1000000)::bigint,
            false, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
        RETURN;
    END LOOP;
    RAISE EXCEPTION 'fencegate: %: the lease row kept changing under a concurrent acquisition', p_resource;
END
$$;
-- +goose StatementEnd

-- fencegate_acquire is the acquisition the coordinator calls in a
-- transaction (sqlstore.LeaseAcquirer): fencegate_acquire_steps, with two
-- cases answered truly that the steps answer request_expired while the
-- request's lease is live:
--
--   * A copy of a request whose locking read found no lease row, because a
--     concurrent copy's first grant had not committed yet, and whose read
--     of the request table then found that grant's record, committed
--     meanwhile: each statement of a READ COMMITTED transaction reads anew.
--     Retries after a lost reply would be told to give up a lease they hold.
--   * Another holder sending the request id of a live lease: not its
--     lease, and not over either. It is held, by the lease's holder.
--
-- Where the steps answer request_expired, the lease row is locked and read
-- again, and when it is live and was made by this request id the answer is
-- retried (the requester holds it) or held (another holder does).
-- Otherwise request_expired stands. The row is the steps' locked row, or
-- one created and committed since their read. Same arguments, columns and
-- statuses as fencegate_acquire_steps.
-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    r       record;
    l       fencegate_lease%ROWTYPE;
    found_l boolean;
    t       timestamptz;
BEGIN
    SELECT * INTO STRICT r FROM fencegate_acquire_steps(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    IF r.status = 'request_expired' THEN
        SELECT * INTO l FROM fencegate_lease WHERE fencegate_lease.resource = p_resource FOR UPDATE;
        found_l := FOUND;
        t := clock_timestamp(); -- after any wait for the lock
        IF found_l AND NOT l.released AND l.expires_at > t AND l.request_id = p_request_id THEN
            RETURN QUERY SELECT CASE WHEN l.holder = p_holder THEN 'retried' ELSE 'held' END,
                l.resource, l.holder, l.fence, l.request_id,
                (extract(epoch FROM l.granted_at) * 1000000)::bigint, (extract(epoch FROM l.expires_at) * 1000000)::bigint,
                l.released, (extract(epoch FROM t) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
            RETURN;
        END IF;
    END IF;
    RETURN QUERY SELECT r.status, r.resource, r.holder, r.fence, r.request_id, r.granted_us, r.expires_us,
        r.released, r.now_us, r.r_fence, r.r_floor, r.r_floor_holder;
END
$$;
-- +goose StatementEnd

-- fencegate_grant is the lease coordinator's acquisition on its own (the
-- Store's Executor, autocommit) with a fast path for the usual case: the
-- resource's lease row exists and is free (released or expired). There a
-- single UPDATE locks the row, checks it is free, takes the next fence and
-- writes the new generation; a plain INSERT records the request and a
-- plain UPDATE raises the floor. fencegate_acquire_steps first locks the
-- row (a row lock is a WAL record of its own), reads the request table,
-- locks the floor row and then upserts it (an upsert locks before it
-- updates, another record): seven statements and nine WAL records where
-- this takes three statements and four.
--
-- Anything else (no lease row yet, a live lease, a retry) is
-- fencegate_acquire's, called from here in the same statement. The two
-- things the fast path can only find out after writing, a request id that
-- already made a generation (a late retry of a lease now over) and a floor
-- at or above the new fence, raise SQLSTATE FG004: the statement's whole
-- transaction rolls back, nothing is written, and the caller runs
-- fencegate_acquire, which checks before it writes and answers
-- request_expired or floor_ahead. FG004 ends the caller's transaction, so
-- fencegate_grant is only for a statement on its own; in a transaction the
-- coordinator calls fencegate_acquire.
--
-- Row order is fencegate_acquire's: the lease row, then the floor row.
-- Waits stay bounded by p_lock_timeout. The UPDATE takes the fence and the
-- clock after the lease row's lock: when the row changed while it waited,
-- Postgres re-evaluates the WHERE and the new values against the newest
-- row (EvalPlanQual). The clock is read in a subquery correlated with the
-- row (its WHERE names l.resource) so that it is read again there; an
-- uncorrelated one is an InitPlan, read once before the wait, which dated
-- a grant before the end of the lease it replaced (the reliability suite's
-- granted-while-live). When the lock was only held, not changed, the values
-- computed before the wait stand: the row was free then, and the grant is
-- dated (and so expires) earlier than its commit, a shorter lease, never a
-- longer one.
--
-- Same columns and statuses as fencegate_acquire.
-- +goose StatementBegin
CREATE FUNCTION fencegate_grant(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint, p_lock_timeout text)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_fence   bigint;
    v_granted timestamptz;
    v_expires timestamptz;
    o_request text;
    o_fence   bigint;
    o_settled bigint;
BEGIN
    PERFORM set_config('lock_timeout', p_lock_timeout, true);
    -- The generation to overwrite, read without a lock: the UPDATE below
    -- overwrites it only if it is still the row's (its fence), re-checked
    -- on the newest row after any wait for the lock.
    SELECT l.request_id, l.fence, l.settled_fence INTO o_request, o_fence, o_settled
      FROM fencegate_lease AS l WHERE l.resource = p_resource;
    UPDATE fencegate_lease AS l
       SET holder = p_holder, fence = nextval('fencegate_fence_seq'), request_id = p_request_id,
           (granted_at, expires_at) = (SELECT t, t + p_ttl_us * interval '1 microsecond'
                                         FROM clock_timestamp() AS t WHERE l.resource IS NOT NULL),
           released = false
     WHERE l.resource = p_resource AND l.fence = o_fence AND l.request_id <> p_request_id
       AND (l.released OR l.expires_at <= clock_timestamp())
    RETURNING l.fence, l.granted_at, l.expires_at INTO v_fence, v_granted, v_expires;
    IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM fencegate_acquire(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
        RETURN;
    END IF;
    -- A request id that already made a generation: read after the row's
    -- lock, in a snapshot of its own, so that a record written by the
    -- transaction that overwrote that generation (which held the lock) is
    -- seen. FG004: the caller runs fencegate_acquire, which answers it.
    PERFORM 1 FROM fencegate_request r WHERE r.resource = p_resource AND r.request_id = p_request_id;
    IF FOUND THEN
        RAISE EXCEPTION 'fencegate: %: request % already made a generation', p_resource, p_request_id
            USING ERRCODE = 'FG004';
    END IF;
    IF o_settled IS DISTINCT FROM o_fence THEN
        INSERT INTO fencegate_request (resource, request_id, fence) VALUES (p_resource, o_request, o_fence)
        ON CONFLICT ON CONSTRAINT fencegate_request_pkey DO NOTHING;
    END IF;
    -- Co-located mode: raise the gate's floor in this transaction, so the
    -- grant and the refusal of every older fence commit together.
    UPDATE fencegate_floor AS f SET floor = v_fence, holder = p_holder, updated_at = clock_timestamp()
     WHERE f.resource = p_resource AND f.floor < v_fence;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencegate: %: no floor below the new fence %', p_resource, v_fence
            USING ERRCODE = 'FG004';
    END IF;
    RETURN QUERY SELECT 'granted', p_resource, p_holder, v_fence, p_request_id,
        (extract(epoch FROM v_granted) * 1000000)::bigint, (extract(epoch FROM v_expires) * 1000000)::bigint,
        false, (extract(epoch FROM v_granted) * 1000000)::bigint, 0::bigint, 0::bigint, ''::text;
END
$$;
-- +goose StatementEnd

-- fencegate_acquire_turn is the acquisition of a waiter whose turn has come
-- (lease.Coordinator.AcquireWait): fencegate_grant (p_fast) or
-- fencegate_acquire, and, when that grants the lease (or answers the live
-- lease this very request made), the waiter's place p_waiter taken out of
-- the queue in the same transaction. The queue then never shows a granted
-- waiter ahead of the next one: the holder's release, which may follow at
-- once, names the next waiter first, and no round trip after the grant is
-- left on the hand-over's path. The delete's own trigger
-- (fencegate_waiter_left) announces nothing, since the lease is live.
--
-- Errors are the called function's: FG004 (or 23505) from the fast path
-- rolls the whole statement back, the waiter's place with it, and the
-- caller asks again with p_fast false. Same columns and statuses as
-- fencegate_acquire.
-- +goose StatementBegin
CREATE FUNCTION fencegate_acquire_turn(p_resource text, p_holder text, p_request_id text, p_ttl_us bigint,
                                       p_lock_timeout text, p_waiter bigint, p_fast boolean)
RETURNS TABLE (status text, resource text, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, released boolean, now_us bigint,
               r_fence bigint, r_floor bigint, r_floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r record;
BEGIN
    IF p_fast THEN
        SELECT * INTO STRICT r FROM fencegate_grant(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    ELSE
        SELECT * INTO STRICT r FROM fencegate_acquire(p_resource, p_holder, p_request_id, p_ttl_us, p_lock_timeout);
    END IF;
    IF r.status IN ('granted', 'retried') THEN
        DELETE FROM fencegate_waiter AS w WHERE w.seq = p_waiter;
    END IF;
    RETURN QUERY SELECT r.status, r.resource, r.holder, r.fence, r.request_id, r.granted_us, r.expires_us,
        r.released, r.now_us, r.r_fence, r.r_floor, r.r_floor_holder;
END
$$;
-- +goose StatementEnd

-- A holder's release can hand the resource straight to its first live
-- waiter, inside the transaction of the holder's last fenced write
-- (handover.Do, handover.CommitBatch), so that a turn of a
-- contended lock costs one durable commit instead of two: the write, the
-- release and the next grant commit together or not at all.
--
-- The first term of a handed-over lease ends at the earlier of touched_at +
-- term and the waiter row's own expiry: a waiter that died after its last
-- touch keeps the resource no longer than its place would have blocked the
-- queue (WaiterTTL), and the live waiter renews it to a full term.
--
-- fencegate_hand_over(resource, holder, fence) does it in the caller's
-- transaction: it locks the lease row, and, unless (resource, holder, fence)
-- is the live lease, returns released = false having written nothing;
-- otherwise it locks the first live waiter's row (a touch in flight is
-- waited for, and its new touched_at read) and grants it a new generation
-- under the next fence (floor raised, request recorded, row deleted) and
-- announces it, naming the waiter, "granted", and the new generation's
-- fence, request id, start and expiry (µs), so that the waiter need not
-- read its lease; with no such waiter (none, one whose row names no
-- request, a floor above the new fence, a first term already over) it
-- releases the lease, which the release trigger announces.
-- +goose StatementBegin
CREATE FUNCTION fencegate_hand_over(p_resource text, p_holder text, p_fence bigint)
RETURNS TABLE (released boolean, waiter bigint, holder text, fence bigint, request_id text,
               granted_us bigint, expires_us bigint, now_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    t      timestamptz;
    w      record;
    v_f    bigint;
    v_fl   bigint;
    v_exp  timestamptz;
    v_sch  text;
    v_req  text;
BEGIN
    SELECT l.request_id INTO v_req FROM fencegate_lease l
     WHERE l.resource = p_resource AND l.holder = p_holder AND l.fence = p_fence
       AND NOT l.released AND l.expires_at > clock_timestamp()
       FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0::bigint, ''::text, 0::bigint, ''::text, 0::bigint, 0::bigint,
            (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
        RETURN;
    END IF;
    t := clock_timestamp();
    SELECT q.seq, q.holder, q.request_id, q.term_us, q.touched_at, q.expires_at INTO w
      FROM fencegate_waiter q
     WHERE q.resource = p_resource AND q.expires_at > t
     ORDER BY q.seq LIMIT 1
       FOR UPDATE;
    IF FOUND AND w.request_id IS NOT NULL AND w.touched_at IS NOT NULL THEN
        v_exp := LEAST(w.touched_at + w.term_us * interval '1 microsecond', w.expires_at);
        IF v_exp > clock_timestamp() THEN
            v_f := nextval('fencegate_fence_seq');
            SELECT f.floor INTO v_fl FROM fencegate_floor f WHERE f.resource = p_resource FOR UPDATE;
            IF v_fl IS NULL OR v_fl <= v_f THEN
                UPDATE fencegate_lease l SET holder = w.holder, fence = v_f, request_id = w.request_id,
                       granted_at = w.touched_at, expires_at = v_exp, released = false
                 WHERE l.resource = p_resource;
                PERFORM fencegate_fence(p_resource, v_f, w.holder, false, false);
                -- The holder's generation ends here: its request is logged.
                INSERT INTO fencegate_request (resource, request_id, fence)
                VALUES (p_resource, v_req, p_fence) ON CONFLICT DO NOTHING;
                DELETE FROM fencegate_waiter q WHERE q.seq = w.seq;
                SELECT n.nspname INTO v_sch FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE c.oid = 'fencegate_lease'::regclass;
                PERFORM pg_notify('fencegate_lease', concat_ws(chr(31), p_resource, w.seq::text, v_sch, 'granted',
                    v_f::text, w.request_id, (extract(epoch FROM w.touched_at) * 1000000)::bigint::text,
                    (extract(epoch FROM v_exp) * 1000000)::bigint::text));
                RETURN QUERY SELECT true, w.seq, w.holder, v_f, w.request_id,
                    (extract(epoch FROM w.touched_at) * 1000000)::bigint,
                    (extract(epoch FROM v_exp) * 1000000)::bigint,
                    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
                RETURN;
            END IF;
        END IF;
    END IF;
    UPDATE fencegate_lease l SET released = true, expires_at = LEAST(l.expires_at, clock_timestamp())
     WHERE l.resource = p_resource;
    RETURN QUERY SELECT true, 0::bigint, ''::text, 0::bigint, ''::text, 0::bigint, 0::bigint,
        (extract(epoch FROM clock_timestamp()) * 1000000)::bigint;
END
$$;
-- +goose StatementEnd

-- fencegate_semaphore stores each semaphore's number of permits
-- (semaphore.Semaphore): every participant reads it before it grants a permit,
-- so lowering it (Semaphore.SetPermits) takes effect for all of them at
-- once, whatever N each was built with. Lowering it revokes no live
-- permit: the semaphore grants nothing until fewer than the new N are live.
-- The bound is semaphore.MaxPermits.
CREATE TABLE fencegate_semaphore (
    name       text        PRIMARY KEY,
    permits    integer     NOT NULL CHECK (permits BETWEEN 1 AND 1024),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Path claims (fence.PathResource): a claim of a path takes its lock
-- exclusively and the locks of the directories above it shared; a write
-- to a file takes the locks of the directories above it shared and reads
-- their floors. Two claims that overlap therefore queue on the shallower
-- path's lock, siblings never wait on each other, and a directory's claim
-- waits for the writes below it in flight (lease's and gate's docs, Paths).
-- A row per path ever locked; the rows hold nothing but the lock.
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
DROP FUNCTION fencegate_path_lock(text, boolean);
DROP TABLE fencegate_path_lock;
DROP TABLE fencegate_semaphore;
DROP FUNCTION fencegate_hand_over(text, text, bigint);
DROP FUNCTION fencegate_acquire_turn(text, text, text, bigint, text, bigint, boolean);
DROP FUNCTION fencegate_grant(text, text, text, bigint, text);
DROP FUNCTION fencegate_acquire(text, text, text, bigint, text);
DROP FUNCTION fencegate_acquire_steps(text, text, text, bigint, text);
DROP TABLE fencegate_watcher;
DROP TABLE fencegate_waiter;
DROP TABLE fencegate_lease;
DROP FUNCTION fencegate_lease_notify();
DROP TABLE fencegate_request;
DROP SEQUENCE fencegate_fence_seq;
