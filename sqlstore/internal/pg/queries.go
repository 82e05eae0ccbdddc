// Package pg is the Postgres dialect that the two Postgres drivers, pgxv5
// (pgx/v5 natively) and pgsql (database/sql through pgx's stdlib), share:
// its SQL text, its migrations, its error classification and its clock.
package pg

import (
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/internal/sqlexec"
)

// Dialect is Postgres's name.
const Dialect sqlstore.Dialect = "postgres"

// pgLeaseCols is the column list every lease query returns, in scan order,
// followed by the database's clock.
const (
	pgLeaseCols = `resource, holder, fence, request_id,
  (extract(epoch FROM granted_at) * 1000000)::bigint,
  (extract(epoch FROM expires_at) * 1000000)::bigint,
  released`
	pgNow = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

	// pgWaiterCols is the column list every waiter query returns
	// (sqlexec.ScanWaiter).
	pgWaiterCols = `seq, resource, holder, (extract(epoch FROM expires_at) * 1000000)::bigint,
  coalesce(request_id, ''), coalesce(term_us, 0), coalesce((extract(epoch FROM touched_at) * 1000000)::bigint, 0)`

	// pgFirstWaiter is the lowest live waiter's seq of resource $1, 0 for
	// none.
	pgFirstWaiter = `(SELECT coalesce(min(w.seq), 0) FROM fencegate_waiter w
  WHERE w.resource = $1 AND w.expires_at > clock_timestamp())`
)

// The Postgres floor statement is a call of fencegate_fence, whose comment tells its two paths: a fence equal to the floor,
// from the holder that set it, only locks the floor row (FOR NO KEY UPDATE,
// no new row version, writers of a resource queue in arrival order); any
// other takes the GREATEST upsert. A function, because the server caches the
// plans of its statements for the session whatever the client's protocol:
// the CTE that held both paths before was parsed and planned on every call
// under pgx's exec and simple protocol modes (a transaction pooler's), which
// cost more than running it. The call itself is short to parse.
const (
	pgFloorRaise         = `SELECT floor, holder FROM fencegate_fence($1, $2, $3, false, false)`
	pgFloorRaiseVerified = `SELECT floor, holder FROM fencegate_fence($1, $2, $3, true, false)`
)

// HandOverSQL is sqlstore.Executor.LeaseHandOver in one statement
// (fencegate_hand_over): $1 resource, $2 holder, $3 fence → released, waiter,
// and the new generation's holder, fence, request id, granted µs, expires
// µs, and the clock (sqlexec.Queries.LeaseHandOver).
const HandOverSQL = `SELECT * FROM fencegate_hand_over($1, $2, $3)`

// Queries is the Postgres SQL text; AutocommitQueries the same for
// statements run on their own (Store.Executor).
var (
	Queries           = queries
	AutocommitQueries = queries.Autocommit()
)

var queries = &sqlexec.Queries{
	LeaseReleaseSettles: true,
	RequestInRow:        true,
	FloorRaise:          pgFloorRaise,
	FloorRaiseVerified:  pgFloorRaiseVerified,
	FloorGet: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor WHERE resource = $1`,
	FloorList: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor ORDER BY resource`,
	RejectionInsert: `
INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
RETURNING seq, (extract(epoch FROM at) * 1000000)::bigint`,
	// The refusal log's rule, the SQL protocol's (fencegate_log_refusal
	// calls the same function).
	RefusalLog: `SELECT seq, floor, floor_holder, not_issued, at_us FROM fencegate_refusal_record($1, $2, $3)`,
	RejectionList: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, (extract(epoch FROM at) * 1000000)::bigint
  FROM fencegate_rejection
 WHERE ($1 = '' OR resource = $1) AND seq > $2
 ORDER BY seq LIMIT $3`,
	RejectionListDesc: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, (extract(epoch FROM at) * 1000000)::bigint
  FROM fencegate_rejection
 WHERE ($1 = '' OR resource = $1) AND seq > $2
 ORDER BY seq DESC LIMIT $3`,
	SetLockTimeout: `SELECT set_config('lock_timeout', $1, true)`,
	FenceNext:      `SELECT nextval('fencegate_fence_seq')`,
	// ALTER SEQUENCE takes a lock that nextval waits for, so no fence is
	// issued between reading the sequence and moving it.
	FenceLock: `ALTER SEQUENCE fencegate_fence_seq CACHE 1`,
	FenceAtLeast: `
SELECT setval('fencegate_fence_seq', $1::bigint - 1, true)
  FROM fencegate_fence_seq
 WHERE (CASE WHEN is_called THEN last_value + 1 ELSE last_value END) < $1::bigint`,
	// The CTE locks first; the outer clock_timestamp() is read after any
	// wait for the lock, so Now is never older than the row.
	LeaseGetForUpdate: `
WITH l AS MATERIALIZED (SELECT * FROM fencegate_lease WHERE resource = $1 FOR UPDATE)
SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM l`,
	LeaseGet: `SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM fencegate_lease WHERE resource = $1`,
	// fencegate_path_lock, and the pattern index the byte-wise
	// range below uses whatever the collation.
	PathLockShared:    `SELECT fencegate_path_lock($1, false)`,
	PathLockExclusive: `SELECT fencegate_path_lock($1, true)`,
	LeaseLiveBelow: `
SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM fencegate_lease
 WHERE resource ~>=~ $1 AND resource ~<~ $2 AND resource <> $1
   AND NOT released AND expires_at > clock_timestamp()
 ORDER BY resource COLLATE "C" LIMIT 1`,
	LeaseList: `SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM fencegate_lease ORDER BY resource`,
	LeaseInsert: `
WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
SELECT $1, $2, $3, $4, now.t, now.t + $5::bigint * interval '1 microsecond', false FROM now
ON CONFLICT (resource) DO NOTHING
RETURNING ` + pgLeaseCols + `, (extract(epoch FROM granted_at) * 1000000)::bigint`,
	LeaseReplaceDated: `
UPDATE fencegate_lease SET holder = $2, fence = $3, request_id = $4,
       granted_at = timestamptz 'epoch' + $5::bigint * interval '1 microsecond',
       expires_at = timestamptz 'epoch' + $6::bigint * interval '1 microsecond', released = false
 WHERE resource = $1
RETURNING ` + pgLeaseCols + `, ` + pgNow,
	LeaseReplace: `
WITH now AS (SELECT clock_timestamp() AS t)
UPDATE fencegate_lease SET holder = $2, fence = $3, request_id = $4, granted_at = now.t,
       expires_at = now.t + $5::bigint * interval '1 microsecond', released = false
  FROM now WHERE resource = $1
RETURNING ` + pgLeaseCols + `, (extract(epoch FROM now.t) * 1000000)::bigint`,
	// fencegate_renew_lease, the SQL protocol's renewal (fencegate_renew
	// answers the same in milliseconds left): never ends a term earlier
	// than it was (GREATEST), for a holder may already have been given the
	// later deadline.
	LeaseRenew: `SELECT * FROM fencegate_renew_lease($1, $2, $3, $4::bigint)`,
	// fencegate_renew_leases, the one text of the renewal rule, which
	// fencegate_renew_lease calls with one request: one clock reading for
	// the whole batch; a request's ordinality (from 1) tells its row.
	LeaseRenewBatch: `SELECT * FROM fencegate_renew_leases($1::text[], $2::text[], $3::bigint[], $4::bigint[])`,
	// The releases are fencegate_release_lease, the rule the SQL protocol's
	// fencegate_release runs after its argument checks (made in Go here):
	// those checks and a set-returning call cost about as much server time
	// as the release itself (docs/PERFORMANCE.md). A row when it released
	// the lease. $4 is sqlstore.LeaseReleaseParams.Settled (its p_settled).
	LeaseRelease: `SELECT 1 WHERE fencegate_release_lease($1, $2, $3, false, $4)`,
	// On its own, a release commits without waiting for its WAL to reach
	// disk (or a synchronous standby), the function's p_async: a release
	// lost in a crash only keeps the resource locked until the lease's
	// expiry, and the next grant's synchronous commit flushes it.
	LeaseReleaseAutocommit: `SELECT 1 WHERE fencegate_release_lease($1, $2, $3, true, $4)`,
	// The same releases, also reading the first live waiter in the
	// statement's snapshot (a waiter joining meanwhile looks for itself).
	LeaseReleaseFirst:           `SELECT ` + pgFirstWaiter + ` WHERE fencegate_release_lease($1, $2, $3, false, $4)`,
	LeaseReleaseFirstAutocommit: `SELECT ` + pgFirstWaiter + ` WHERE fencegate_release_lease($1, $2, $3, true, $4)`,
	// The prunes delete by a batch of row ids, Postgres's DELETE having no
	// LIMIT.
	RequestPrune: `
DELETE FROM fencegate_request WHERE ctid = ANY (ARRAY(
  SELECT ctid FROM fencegate_request
   WHERE made_at < clock_timestamp() - $1::bigint * interval '1 microsecond' LIMIT $2))`,
	WaiterPruneAll: `
DELETE FROM fencegate_waiter WHERE seq = ANY (ARRAY(
  SELECT seq FROM fencegate_waiter WHERE expires_at <= clock_timestamp() LIMIT $1))`,
	RejectionPrune: `
DELETE FROM fencegate_rejection WHERE seq = ANY (ARRAY(
  SELECT seq FROM fencegate_rejection
   WHERE seq <= (SELECT max(seq) FROM fencegate_rejection) - $1 ORDER BY seq LIMIT $2))`,
	RequestInsert: `
INSERT INTO fencegate_request (resource, request_id, fence) VALUES ($1, $2, $3)
ON CONFLICT (resource, request_id) DO NOTHING`,
	// The lease row is the record of its own generation's request, which
	// fencegate_request holds only once a new generation overwrote the row
	// (migration 00002's fencegate_acquire_steps).
	RequestFence: `
SELECT fence FROM fencegate_lease WHERE resource = $1 AND request_id = $2
UNION ALL
SELECT fence FROM fencegate_request WHERE resource = $1 AND request_id = $2
LIMIT 1`,
	// The queue's statements are one round trip each: the prune rides
	// along the insert, the first waiter's read along the touch (its
	// snapshot predates the touch, hence "or seq = $2").
	WaiterInsert: `
WITH pruned AS (DELETE FROM fencegate_waiter WHERE resource = $1 AND expires_at <= clock_timestamp()),
now AS (SELECT clock_timestamp() AS t)
INSERT INTO fencegate_waiter (resource, holder, expires_at, request_id, term_us, touched_at)
SELECT $1, $2, now.t + $3::bigint * interval '1 microsecond', $4, $5, now.t FROM now
RETURNING seq`,
	WaiterTouchFirst: `
WITH now AS (SELECT clock_timestamp() AS t),
touched AS (
  UPDATE fencegate_waiter SET expires_at = now.t + $3::bigint * interval '1 microsecond', touched_at = now.t
    FROM now WHERE resource = $1 AND seq = $2 RETURNING seq)
SELECT (SELECT min(seq) FROM fencegate_waiter
         WHERE resource = $1 AND (expires_at > clock_timestamp() OR seq = $2))
  FROM touched`,
	WaiterTouch: `
WITH now AS (SELECT clock_timestamp() AS t)
UPDATE fencegate_waiter SET expires_at = now.t + $3::bigint * interval '1 microsecond', touched_at = now.t
  FROM now WHERE resource = $1 AND seq = $2`,
	WaiterFirst: `
SELECT min(seq) FROM fencegate_waiter
 WHERE resource = $1 AND (expires_at > clock_timestamp() OR seq = $2)`,
	WaiterDelete: `DELETE FROM fencegate_waiter WHERE seq = $1`,
	SemaphoreGet: `SELECT permits FROM fencegate_semaphore WHERE name = $1`,
	SemaphoreSet: `
INSERT INTO fencegate_semaphore (name, permits) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET permits = EXCLUDED.permits, updated_at = clock_timestamp()`,
	WaiterList: `
SELECT ` + pgWaiterCols + `
  FROM fencegate_waiter WHERE resource = $1 AND expires_at > clock_timestamp() ORDER BY seq`,
	WaiterHead: `
SELECT ` + pgWaiterCols + `
  FROM fencegate_waiter WHERE resource = $1 AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1
   FOR UPDATE`,
	LeaseHandOver: HandOverSQL,
	// fencegate_acquire, over fencegate_acquire_steps.
	LeaseAcquire: `SELECT * FROM fencegate_acquire($1, $2, $3, $4::bigint, $5)`,
	// fencegate_grant: the same with a fast path for a free lease row;
	// it raises FG004 (or 23505) where it would have to undo its writes.
	// It restates the grant rule of fencegate_acquire for speed; the
	// conformance table (sqlstoretest.Rules) holds the two, and the
	// shared steps, to the same answer in every row: on the autocommit
	// Executor (fast path first), in a transaction (fencegate_acquire
	// only) and stepwise.
	LeaseAcquireAutocommit: `SELECT * FROM fencegate_grant($1, $2, $3, $4::bigint, $5)`,
	// fencegate_acquire_turn: either, and a grant deletes the waiter's row.
	LeaseAcquireTurn: `SELECT * FROM fencegate_acquire_turn($1, $2, $3, $4::bigint, $5, $6, $7)`,
}
