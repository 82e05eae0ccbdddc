-- fencegate schema for Postgres, the SQL protocol (docs/SQL.md, version 1):
-- the functions any client, in any language, calls with plain parameters
-- and reads with plain columns. They are thin layers over the rules the
-- earlier migrations hold (fencegate_acquire, fencegate_fence, the lease
-- and floor tables), so that the Go drivers and every other client follow
-- one rulebook; where the Go drivers do the same act they call the same
-- function (docs/SQL.md, "What Go calls").
--
-- Arguments are always (resource, holder, fence | ttl ...); times are
-- milliseconds read from the database's clock. Bad input raises SQLSTATE
-- 22023 (invalid_parameter_value) before anything is read or written.

-- +goose Up

-- +goose StatementBegin
CREATE FUNCTION fencegate_protocol_version() RETURNS integer
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;
-- +goose StatementEnd

-- fencegate_check_name raises 22023 unless p_value is a valid name: 1 to
-- 256 bytes (fence.MaxNameLen), no control character (C0, DEL, C1), and,
-- with p_no_path, not a path claim ("path:..."): paths take their
-- ancestors' locks, which only the Go library does in version 1. Invalid
-- UTF-8 never reaches it: the server refuses it as the parameter arrives
-- (SQLSTATE 22021).
-- +goose StatementBegin
CREATE FUNCTION fencegate_check_name(p_field text, p_value text, p_no_path boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF p_value IS NULL OR p_value = '' THEN
        RAISE EXCEPTION 'fencegate: invalid %: must not be empty', p_field USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_value) > 256 THEN
        RAISE EXCEPTION 'fencegate: invalid %: % bytes is longer than the limit of 256', p_field, octet_length(p_value)
            USING ERRCODE = '22023';
    END IF;
    IF p_value ~ E'[\\x01-\\x1f\\x7f-\\x9f]' THEN
        RAISE EXCEPTION 'fencegate: invalid %: % contains a control character', p_field, quote_literal(p_value)
            USING ERRCODE = '22023';
    END IF;
    IF p_no_path AND starts_with(p_value, 'path:') THEN
        RAISE EXCEPTION 'fencegate: invalid %: % is a path claim, which protocol version 1 leaves to the Go library', p_field, quote_literal(p_value)
            USING ERRCODE = '22023';
    END IF;
END
$$;
-- +goose StatementEnd

-- fencegate_check_request raises 22023 unless p_request_id is a valid
-- request id: 1 to 128 bytes of printable ASCII without spaces (a UUID,
-- say), the rule of the Go library (lease) and of the MySQL procedures
-- (fencegate_valid_request), with the same messages.
-- +goose StatementBegin
CREATE FUNCTION fencegate_check_request(p_request_id text) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF coalesce(octet_length(p_request_id), 0) NOT BETWEEN 1 AND 128 THEN
        RAISE EXCEPTION 'fencegate: request_id must be 1 to 128 bytes' USING ERRCODE = '22023';
    END IF;
    IF p_request_id !~ E'^[\\x21-\\x7e]+$' THEN
        RAISE EXCEPTION 'fencegate: request_id must be printable ASCII without spaces' USING ERRCODE = '22023';
    END IF;
END
$$;
-- +goose StatementEnd

-- fencegate_check_args validates the arguments every protocol function
-- shares: resource, holder, and a fence and a term where the caller passes
-- them (p_check_fence, p_check_ttl). A term is 1 ms to 24 h, the lease
-- coordinator's default MaxTTL, which lease.Coordinator.Prune's proof
-- counts on. p_no_path refuses a path claim's resource: the acquisitions
-- and fence checks, which for a path take its ancestors' locks in Go; a
-- path lease's renewal and release are the same as any other's.
-- +goose StatementBegin
CREATE FUNCTION fencegate_check_args(p_resource text, p_holder text, p_fence bigint, p_check_fence boolean,
                                     p_ttl_ms bigint, p_check_ttl boolean, p_no_path boolean) RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM fencegate_check_name('resource', p_resource, p_no_path);
    PERFORM fencegate_check_name('holder', p_holder, false);
    IF p_check_fence AND (p_fence IS NULL OR p_fence <= 0) THEN
        RAISE EXCEPTION 'fencegate: invalid fence: % is not positive', coalesce(p_fence::text, 'NULL') USING ERRCODE = '22023';
    END IF;
    IF p_check_ttl AND (p_ttl_ms IS NULL OR p_ttl_ms <= 0 OR p_ttl_ms > 86400000) THEN
        RAISE EXCEPTION 'fencegate: invalid ttl_ms: % is not in 1..86400000 (24 h)', coalesce(p_ttl_ms::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
END
$$;
-- +goose StatementEnd

-- fencegate_claim is the protocol's acquisition: fencegate_acquire (the
-- lease coordinator's acquisition in a transaction, with the grant rule
-- the Go drivers use) with its answer in milliseconds left. p_request_id
-- names the request, so that a retry after a lost reply is answered with
-- the same grant ('retried'); NULL has the database make one
-- (gen_random_uuid). p_lock_timeout bounds the wait for the lease row's
-- lock (NULL: the session's lock_timeout).
--
--   granted          fence: the new fence; holder: the caller; ttl_ms: the term
--   retried          this request's live lease: its fence, the time left
--   held             fence NULL; holder: who holds it; ttl_ms: until it
--                    frees (rounded up)
--   request_expired  this request made a lease that is over: nothing granted
--   floor_ahead      the floor (raised by fences from outside this
--                    database's sequence) is above the next fence: nothing
--                    granted; holder: the floor's holder
-- +goose StatementBegin
CREATE FUNCTION fencegate_claim(p_resource text, p_holder text, p_ttl_ms bigint, p_request_id text DEFAULT NULL,
                                p_lock_timeout text DEFAULT NULL)
RETURNS TABLE (status text, fence bigint, holder text, ttl_ms bigint, request_id text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_rid text := coalesce(p_request_id, gen_random_uuid()::text);
    r     record;
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, NULL, false, p_ttl_ms, true, true);
    IF p_request_id IS NOT NULL THEN
        PERFORM fencegate_check_request(p_request_id);
    END IF;
    SELECT * INTO STRICT r FROM fencegate_acquire(p_resource, p_holder, v_rid, p_ttl_ms * 1000,
        coalesce(p_lock_timeout, current_setting('lock_timeout')));
    RETURN QUERY SELECT * FROM fencegate_claim_answer(r.status, r.holder, r.fence, r.expires_us, r.now_us, r.r_floor_holder, v_rid);
END
$$;
-- +goose StatementEnd

-- fencegate_claim_answer turns an answer of fencegate_acquire into the
-- protocol's columns.
-- +goose StatementBegin
CREATE FUNCTION fencegate_claim_answer(p_status text, p_holder text, p_fence bigint, p_expires_us bigint,
                                       p_now_us bigint, p_floor_holder text, p_request_id text)
RETURNS TABLE (status text, fence bigint, holder text, ttl_ms bigint, request_id text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_status,
           CASE WHEN p_status IN ('granted', 'retried') THEN p_fence END,
           CASE WHEN p_status IN ('granted', 'retried', 'held') THEN p_holder
                WHEN p_status = 'floor_ahead' THEN p_floor_holder END,
           CASE WHEN p_status IN ('granted', 'retried') THEN greatest((p_expires_us - p_now_us) / 1000, 0)
                WHEN p_status = 'held' THEN greatest((p_expires_us - p_now_us + 999) / 1000, 0) END,
           p_request_id
$$;
-- +goose StatementEnd

-- fencegate_claim_set claims every resource of p_resources or none: each
-- by fencegate_acquire, in byte order (so that two sets never deadlock),
-- under one request id, in a subtransaction that is rolled back whole when
-- any member is not granted. Then the members that stood in the way answer
-- as fencegate_claim would (held, request_expired, floor_ahead) and the
-- others 'not_taken' (fence NULL, nothing written). One row per member,
-- in the order given. 1 to 64 members (fence.MaxSetMembers), no name twice.
-- +goose StatementBegin
CREATE FUNCTION fencegate_claim_set(p_resources text[], p_holder text, p_ttl_ms bigint, p_request_id text DEFAULT NULL,
                                    p_lock_timeout text DEFAULT NULL)
RETURNS TABLE (status text, fence bigint, holder text, ttl_ms bigint, request_id text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_rid   text := coalesce(p_request_id, gen_random_uuid()::text);
    v_lt    text := coalesce(p_lock_timeout, current_setting('lock_timeout'));
    v_n     integer := coalesce(cardinality(p_resources), 0);
    v_res   text;
    v_ans   jsonb := '{}';
    v_fail  boolean := false;
    r       record;
BEGIN
    IF v_n < 1 OR v_n > 64 THEN
        RAISE EXCEPTION 'fencegate: invalid resources: % members, want 1 to 64', v_n USING ERRCODE = '22023';
    END IF;
    IF array_ndims(p_resources) <> 1 THEN
        RAISE EXCEPTION 'fencegate: invalid resources: a one-dimensional array, please' USING ERRCODE = '22023';
    END IF;
    FOREACH v_res IN ARRAY p_resources LOOP
        PERFORM fencegate_check_args(v_res, p_holder, NULL, false, p_ttl_ms, true, true);
    END LOOP;
    IF (SELECT count(DISTINCT m) FROM unnest(p_resources) m) <> v_n THEN
        RAISE EXCEPTION 'fencegate: invalid resources: a name appears twice' USING ERRCODE = '22023';
    END IF;
    IF p_request_id IS NOT NULL THEN
        PERFORM fencegate_check_request(p_request_id);
    END IF;
    BEGIN
        FOR v_res IN SELECT m FROM unnest(p_resources) m ORDER BY m COLLATE "C" LOOP
            SELECT * INTO STRICT r FROM fencegate_acquire(v_res, p_holder, v_rid, p_ttl_ms * 1000, v_lt);
            v_fail := v_fail OR r.status NOT IN ('granted', 'retried');
            SELECT v_ans || jsonb_build_object(v_res, to_jsonb(a)) INTO v_ans
              FROM fencegate_claim_answer(r.status, r.holder, r.fence, r.expires_us, r.now_us, r.r_floor_holder, v_rid) a;
        END LOOP;
        IF v_fail THEN
            RAISE EXCEPTION 'fencegate: set not granted' USING ERRCODE = 'FG099'; -- undoes every grant above
        END IF;
    EXCEPTION WHEN SQLSTATE 'FG099' THEN
        NULL;
    END;
    RETURN QUERY
    SELECT CASE WHEN v_fail AND a.status IN ('granted', 'retried') THEN 'not_taken' ELSE a.status END,
           CASE WHEN v_fail THEN NULL ELSE a.fence END,
           CASE WHEN v_fail AND a.status IN ('granted', 'retried') THEN NULL ELSE a.holder END,
           CASE WHEN v_fail AND a.status IN ('granted', 'retried') THEN NULL ELSE a.ttl_ms END,
           v_rid
      FROM unnest(p_resources) WITH ORDINALITY AS m(name, i),
           jsonb_to_record(v_ans -> m.name) AS a(status text, fence bigint, holder text, ttl_ms bigint)
     ORDER BY m.i;
END
$$;
-- +goose StatementEnd

-- fencegate_renew_leases is the renewal rule, the one text of it: each
-- live lease (p_resources[i], p_holders[i], p_fences[i]) is renewed to at
-- least p_ttls_us[i] from now, never earlier than it was (GREATEST), for a
-- holder may already have been given the later deadline. An expired,
-- released or superseded lease is not renewed (no row). One clock reading
-- for the whole batch. Each renewed lease answers its request's ordinality
-- i (from 1), the lease row and the clock (µs); two requests for one lease
-- renew it once, and only one of them is answered. The Go drivers' batch
-- (sqlstore.Executor.LeaseRenewBatch) calls it, fencegate_renew_lease with
-- one request. Both are PL/pgSQL, not SQL functions: Postgres plans a SQL
-- function's UPDATE again at every call, while PL/pgSQL keeps the plan for
-- the session (a third less server time for a renewal of one lease).
-- +goose StatementBegin
CREATE FUNCTION fencegate_renew_leases(p_resources text[], p_holders text[], p_fences bigint[], p_ttls_us bigint[])
RETURNS TABLE (i bigint, resource text, holder text, fence bigint, request_id text, granted_us bigint,
               expires_us bigint, released boolean, now_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
    req AS (SELECT * FROM unnest(p_resources, p_holders, p_fences, p_ttls_us)
             WITH ORDINALITY AS r(resource, holder, fence, ttl_us, i))
    UPDATE fencegate_lease l SET expires_at = GREATEST(l.expires_at, now.t + req.ttl_us * interval '1 microsecond')
      FROM now, req
     WHERE l.resource = req.resource AND l.holder = req.holder AND l.fence = req.fence
       AND NOT l.released AND l.expires_at > now.t
    RETURNING req.i, l.resource, l.holder, l.fence, l.request_id,
        (extract(epoch FROM l.granted_at) * 1000000)::bigint,
        (extract(epoch FROM l.expires_at) * 1000000)::bigint,
        l.released, (extract(epoch FROM now.t) * 1000000)::bigint;
END
$$;
-- +goose StatementEnd

-- fencegate_renew_lease is the renewal of one live lease (resource, holder,
-- fence) to at least p_ttl_us from now: fencegate_renew_leases with one
-- request. It answers the lease row and the clock (µs), as the Go drivers
-- read it (sqlstore.Executor.LeaseRenew calls it); no row when the lease
-- was not live.
-- +goose StatementBegin
CREATE FUNCTION fencegate_renew_lease(p_resource text, p_holder text, p_fence bigint, p_ttl_us bigint)
RETURNS TABLE (resource text, holder text, fence bigint, request_id text, granted_us bigint, expires_us bigint,
               released boolean, now_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RETURN QUERY
    SELECT r.resource, r.holder, r.fence, r.request_id, r.granted_us, r.expires_us, r.released, r.now_us
      FROM fencegate_renew_leases(ARRAY[p_resource], ARRAY[p_holder], ARRAY[p_fence], ARRAY[p_ttl_us]) r;
END
$$;
-- +goose StatementEnd

-- fencegate_renew is the protocol's renewal: fencegate_renew_lease, with
-- the time left after it (ms, rounded down); renewed false and ttl_ms NULL
-- when the lease was not live.
-- +goose StatementBegin
CREATE FUNCTION fencegate_renew(p_resource text, p_holder text, p_fence bigint, p_ttl_ms bigint)
RETURNS TABLE (renewed boolean, ttl_ms bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    r record;
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, p_fence, true, p_ttl_ms, true, false);
    SELECT * INTO r FROM fencegate_renew_lease(p_resource, p_holder, p_fence, p_ttl_ms * 1000);
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, NULL::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT true, greatest((r.expires_us - r.now_us) / 1000, 0);
END
$$;
-- +goose StatementEnd

-- fencegate_release_lease is the release's rule, which fencegate_release
-- runs after its argument checks and the Go drivers call on its own (they
-- check the arguments in Go): the live lease (resource, holder, fence) is
-- released, and true returned; anything else changes nothing. A scalar
-- PL/pgSQL function without those checks, because the checks (three
-- nested function calls) and a set-returning call cost about as much
-- server time as the UPDATE (docs/PERFORMANCE.md, issue 39).
--
-- p_async (the Go drivers' autocommit release) lets the commit skip the
-- wait for its WAL flush: a release lost in a crash only keeps the
-- resource until the lease's expiry; leave it false in a transaction of
-- your own, whose other writes it would loosen too. p_settled is the
-- holder's word that it sent the request that made this lease once, had
-- its answer, and will never send it again: no copy of the request can
-- still arrive, so the request needs no record in fencegate_request when
-- a new generation overwrites the lease row (settled_fence); without it
-- the overwrite records it, and a late copy is refused.
-- +goose StatementBegin
CREATE FUNCTION fencegate_release_lease(p_resource text, p_holder text, p_fence bigint, p_async boolean,
                                        p_settled boolean)
RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_async THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    UPDATE fencegate_lease f SET released = true, expires_at = LEAST(f.expires_at, clock_timestamp()),
           settled_fence = CASE WHEN p_settled THEN p_fence END
     WHERE f.resource = p_resource AND f.holder = p_holder AND f.fence = p_fence
       AND NOT f.released AND f.expires_at > clock_timestamp();
    RETURN FOUND;
END
$$;
-- +goose StatementEnd

-- fencegate_release is the protocol's release of the live lease (resource,
-- holder, fence): fencegate_release_lease (p_async and p_settled are its,
-- false by default) after the arguments' checks; the release trigger
-- announces it to waiters and watchers. A stale release frees nothing and
-- says why: already_released, expired, superseded (the resource's lease
-- has a later fence), or never_held.
-- +goose StatementBegin
CREATE FUNCTION fencegate_release(p_resource text, p_holder text, p_fence bigint, p_async boolean DEFAULT false,
                                  p_settled boolean DEFAULT false)
RETURNS TABLE (released boolean, reason text)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    l fencegate_lease%ROWTYPE;
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, p_fence, true, NULL, false, false);
    released := fencegate_release_lease(p_resource, p_holder, p_fence, p_async, p_settled);
    IF NOT released THEN
        SELECT * INTO l FROM fencegate_lease f WHERE f.resource = p_resource;
        reason := CASE
            WHEN NOT FOUND THEN 'never_held'
            WHEN l.fence = p_fence AND l.holder = p_holder THEN
                CASE WHEN l.released THEN 'already_released' ELSE 'expired' END
            WHEN l.fence > p_fence THEN 'superseded'
            ELSE 'never_held' END;
    END IF;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- fencegate_admission is the verified fence (fencegate_fence with
-- p_verify) with its answer read the same way by fencegate_check and
-- fencegate_admit: admitted, or the floor that refuses (stale: p_fence
-- below it) or, with the floor NULL, a fence that no lease of this
-- database holds (never issued, forged, or another holder's).
-- +goose StatementBegin
CREATE FUNCTION fencegate_admission(p_resource text, p_holder text, p_fence bigint)
RETURNS TABLE (admitted boolean, floor bigint, floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_floor  bigint;
    v_holder text;
BEGIN
    SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_fence(p_resource, p_fence, p_holder, true, false) f;
    IF v_floor IS NULL THEN -- no such lease: nothing written; stale if below the floor
        SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f WHERE f.resource = p_resource;
        IF v_floor IS NULL OR v_floor <= p_fence THEN
            v_floor := NULL;
            v_holder := NULL;
        END IF;
        RETURN QUERY SELECT false, v_floor, v_holder;
        RETURN;
    END IF;
    RETURN QUERY SELECT v_floor = p_fence, v_floor, v_holder;
END
$$;
-- +goose StatementEnd

-- fencegate_check is the fence check a client runs inside its own
-- transaction, with its writes, before COMMIT: it raises the floor to the
-- fence (the floor row stays locked until the transaction ends) and
-- returns it, or refuses: fencegate_refuse raises FG001 (stale: below the
-- floor) or FG002 (never issued), whose DETAIL is the JSON object
-- {"resource","fence","holder","floor","floor_holder"}. The client then
-- rolls back. The Go drivers' one-round-trip fenced begin with
-- VerifyIssued (pgxv5.BeginFloorRaise) calls it.
-- +goose StatementBegin
CREATE FUNCTION fencegate_check(p_resource text, p_holder text, p_fence bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    a record;
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, p_fence, true, NULL, false, true);
    SELECT * INTO STRICT a FROM fencegate_admission(p_resource, p_holder, p_fence);
    IF NOT a.admitted THEN
        PERFORM fencegate_refuse(p_resource, p_holder, p_fence, a.floor, a.floor_holder);
    END IF;
    RETURN a.floor;
END
$$;
-- +goose StatementEnd

-- fencegate_admit raises the floor to the fence outside a write (a
-- successor fencing off its predecessor before it writes, say): the same
-- admission as fencegate_check, with a refusal answered, not raised.
-- +goose StatementBegin
CREATE FUNCTION fencegate_admit(p_resource text, p_holder text, p_fence bigint)
RETURNS TABLE (admitted boolean, floor bigint, floor_holder text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, p_fence, true, NULL, false, true);
    RETURN QUERY SELECT * FROM fencegate_admission(p_resource, p_holder, p_fence);
END
$$;
-- +goose StatementEnd

-- fencegate_refusal_record is the refusal log's rule: it reads the floor
-- again and records (resource, fence, holder, floor, floor_holder) in
-- fencegate_rejection only when the fence really is refused: below the
-- floor (stale), or, at or above it, held by no lease of this database
-- (never issued: not_issued, with the floor 0 and '' when there is none).
-- Anything else (a fence the gate would admit) records nothing, so a
-- caller cannot forge evidence of an overlap that did not happen. It
-- answers the record (no row when nothing was recorded).
-- +goose StatementBegin
CREATE FUNCTION fencegate_refusal_record(p_resource text, p_holder text, p_fence bigint)
RETURNS TABLE (seq bigint, floor bigint, floor_holder text, not_issued boolean, at_us bigint)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
DECLARE
    v_floor  bigint;
    v_holder text;
    v_not    boolean;
BEGIN
    SELECT f.floor, f.holder INTO v_floor, v_holder FROM fencegate_floor f WHERE f.resource = p_resource;
    IF v_floor IS NOT NULL AND p_fence < v_floor THEN
        v_not := false;
    ELSIF NOT EXISTS (SELECT 1 FROM fencegate_lease l
                       WHERE l.resource = p_resource AND l.fence = p_fence AND l.holder = p_holder) THEN
        v_not := true;
    ELSE
        RETURN;
    END IF;
    RETURN QUERY
    INSERT INTO fencegate_rejection AS j (resource, fence, holder, floor, floor_holder, not_issued, at)
    VALUES (p_resource, p_fence, p_holder, coalesce(v_floor, 0), coalesce(v_holder, ''), v_not, clock_timestamp())
    RETURNING j.seq, j.floor, j.floor_holder, j.not_issued, (extract(epoch FROM j.at) * 1000000)::bigint;
END
$$;
-- +goose StatementEnd

-- fencegate_log_refusal is the one call a client makes after the rollback
-- of a transaction fencegate_check refused: fencegate_refusal_record,
-- answering whether it recorded. Skipping it leaves the write refused all
-- the same; only the record is missing.
-- +goose StatementBegin
CREATE FUNCTION fencegate_log_refusal(p_resource text, p_holder text, p_fence bigint) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM fencegate_check_args(p_resource, p_holder, p_fence, true, NULL, false, false);
    RETURN EXISTS (SELECT 1 FROM fencegate_refusal_record(p_resource, p_holder, p_fence));
END
$$;
-- +goose StatementEnd

-- fencegate_watch registers this session as a watcher of p_resource, so
-- that its release is announced on the channel fencegate_lease (a release
-- is announced only when someone waits for it: fencegate_lease_notify),
-- clearing the rows of sessions that are gone. Call it on its own
-- (autocommit), then LISTEN fencegate_lease on the same session, then
-- claim: a release after the watch is announced, one before it is found by
-- the claim. fencegate_unwatch ends it (so does the session's end).
-- +goose StatementBegin
CREATE FUNCTION fencegate_watch(p_resource text) RETURNS void
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM fencegate_check_name('resource', p_resource, false);
    DELETE FROM fencegate_watcher w WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid);
    INSERT INTO fencegate_watcher (pid, resource, prefix) VALUES (pg_backend_pid(), p_resource, false)
    ON CONFLICT DO NOTHING;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION fencegate_unwatch() RETURNS void
LANGUAGE sql VOLATILE AS $$
    DELETE FROM fencegate_watcher WHERE pid = pg_backend_pid()
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION fencegate_unwatch();
DROP FUNCTION fencegate_watch(text);
DROP FUNCTION fencegate_log_refusal(text, text, bigint);
DROP FUNCTION fencegate_refusal_record(text, text, bigint);
DROP FUNCTION fencegate_admit(text, text, bigint);
DROP FUNCTION fencegate_check(text, text, bigint);
DROP FUNCTION fencegate_admission(text, text, bigint);
DROP FUNCTION fencegate_release(text, text, bigint, boolean, boolean);
DROP FUNCTION fencegate_release_lease(text, text, bigint, boolean, boolean);
DROP FUNCTION fencegate_renew(text, text, bigint, bigint);
DROP FUNCTION fencegate_renew_lease(text, text, bigint, bigint);
DROP FUNCTION fencegate_renew_leases(text[], text[], bigint[], bigint[]);
DROP FUNCTION fencegate_claim_set(text[], text, bigint, text, text);
DROP FUNCTION fencegate_claim_answer(text, text, bigint, bigint, bigint, text, text);
DROP FUNCTION fencegate_claim(text, text, bigint, text, text);
DROP FUNCTION fencegate_check_args(text, text, bigint, boolean, bigint, boolean, boolean);
DROP FUNCTION fencegate_check_name(text, text, boolean);
DROP FUNCTION fencegate_check_request(text);
DROP FUNCTION fencegate_protocol_version();
