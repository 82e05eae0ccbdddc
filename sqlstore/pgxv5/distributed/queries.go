package distributed

import "github.com/fencegate/fencegate/sqlstore/internal/sqlexec"

// leaseCols is the column list every lease query returns, in scan order,
// followed by the database's clock.
const (
	leaseCols = `resource, holder, fence, request_id,
  (extract(epoch FROM granted_at) * 1000000)::bigint,
  (extract(epoch FROM expires_at) * 1000000)::bigint,
  released`
	nowMicros = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

	// upsertFloor is the tail of both floor statements: the floor becomes
	// max(floor, fence), and the row is written whatever the outcome (a
	// new row version even when nothing changes). Under optimistic
	// concurrency control only a write makes two transactions that raise
	// the same floor conflict; a locking read alone might not.
	upsertFloor = `
ON CONFLICT (resource) DO UPDATE SET
  floor      = GREATEST(f.floor, excluded.floor),
  holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
  updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
RETURNING f.floor, f.holder`
)

// counterNext takes the next value of a fencegate_counter row ($1 its
// name): the row write makes concurrent takers of one counter conflict, so
// the engine orders them (one waits, or aborts with 40001), and a value
// committed is never handed out again.
const counterNext = `UPDATE fencegate_counter SET value = value + 1 WHERE name = $1 RETURNING value`

// The counters' names (migrations/postgresdist seeds them).
const (
	counterFence     = "fence"
	counterRejection = "rejection"
	counterWaiter    = "waiter"
)

// The statements sqlexec's executor does not run for this profile, because
// they take a counter first (see executor).
const (
	rejectionInsert = `
INSERT INTO fencegate_rejection (seq, resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp())
RETURNING (extract(epoch FROM at) * 1000000)::bigint`
	waiterPrune = `DELETE FROM fencegate_waiter WHERE resource = $1 AND expires_at <= clock_timestamp()`
	// $1 seq, then sqlexec.WaiterAddArgs: resource, holder, ttl µs,
	// request id or NULL, term µs.
	waiterInsert = `
INSERT INTO fencegate_waiter (seq, resource, holder, expires_at, request_id, term_us, touched_at)
SELECT $1, $2, $3, now.t + $4::bigint * interval '1 microsecond', $5, $6, now.t
  FROM (SELECT clock_timestamp() AS t) now`

	waiterCols = `seq, resource, holder, (extract(epoch FROM expires_at) * 1000000)::bigint,
  coalesce(request_id, ''), coalesce(term_us, 0), coalesce((extract(epoch FROM touched_at) * 1000000)::bigint, 0)`
)

// queries is the profile's SQL text for sqlexec: plain statements, each
// one round trip, no function of fencegate's, no sequence, no writable
// CTE, no MATERIALIZED. A statement that needs one clock reading for two
// columns reads it in a FROM subquery. The fields left empty turn off
// sqlexec's one-statement paths (FloorHeld's lock-only floor, the batch
// renewal, the one-statement acquisition, the release that reads the
// first waiter), so the lease coordinator runs its steps one statement at
// a time.
var queries = &sqlexec.Queries{
	FloorRaise: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
VALUES ($1, $2, $3, clock_timestamp())` + upsertFloor,
	FloorRaiseVerified: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
SELECT l.resource, l.fence, l.holder, clock_timestamp() FROM fencegate_lease l
 WHERE l.resource = $1 AND l.fence = $2 AND l.holder = $3` + upsertFloor,
	FloorGet: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor WHERE resource = $1`,
	FloorList: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor ORDER BY resource`,
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
	FenceNext:      `UPDATE fencegate_counter SET value = value + 1 WHERE name = 'fence' RETURNING value`,
	// The counter holds the last fence issued. The row is written even
	// when it is far enough already, so that it stays locked (or in
	// conflict) against every FenceNext until this transaction ends.
	FenceAtLeast: `
UPDATE fencegate_counter SET value = GREATEST(value, $1::bigint - 1) WHERE name = 'fence'`,
	// The subquery locks first and is not flattened (it has FOR UPDATE),
	// so the outer clock_timestamp() is read after any wait for the lock:
	// Now is never older than the row.
	LeaseGetForUpdate: `
SELECT ` + leaseCols + `, ` + nowMicros + `
  FROM (SELECT * FROM fencegate_lease WHERE resource = $1 FOR UPDATE) l`,
	LeaseGet: `SELECT ` + leaseCols + `, ` + nowMicros + ` FROM fencegate_lease WHERE resource = $1`,
	// Path locks (fencegate_path_lock): both kinds are the upsert that writes
	// the row, shared ones included (see the migration). The range reads
	// names byte-wise (COLLATE "C"), whatever the database's collation.
	PathLockShared: `
INSERT INTO fencegate_path_lock (resource) VALUES ($1)
ON CONFLICT (resource) DO UPDATE SET resource = EXCLUDED.resource`,
	PathLockExclusive: `
INSERT INTO fencegate_path_lock (resource) VALUES ($1)
ON CONFLICT (resource) DO UPDATE SET resource = EXCLUDED.resource`,
	LeaseLiveBelow: `
SELECT ` + leaseCols + `, ` + nowMicros + ` FROM fencegate_lease
 WHERE resource COLLATE "C" >= $1 AND resource COLLATE "C" < $2 AND resource <> $1
   AND NOT released AND expires_at > clock_timestamp()
 ORDER BY resource COLLATE "C" LIMIT 1`,
	LeaseList: `SELECT ` + leaseCols + `, ` + nowMicros + ` FROM fencegate_lease ORDER BY resource`,
	LeaseInsert: `
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
SELECT $1, $2, $3, $4, now.t, now.t + $5::bigint * interval '1 microsecond', false
  FROM (SELECT clock_timestamp() AS t) now
ON CONFLICT (resource) DO NOTHING
RETURNING ` + leaseCols + `, (extract(epoch FROM granted_at) * 1000000)::bigint`,
	LeaseReplaceDated: `
UPDATE fencegate_lease SET holder = $2, fence = $3, request_id = $4,
       granted_at = timestamptz 'epoch' + $5::bigint * interval '1 microsecond',
       expires_at = timestamptz 'epoch' + $6::bigint * interval '1 microsecond', released = false
 WHERE resource = $1
RETURNING ` + leaseCols + `, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`,
	LeaseReplace: `
UPDATE fencegate_lease SET holder = $2, fence = $3, request_id = $4, granted_at = now.t,
       expires_at = now.t + $5::bigint * interval '1 microsecond', released = false
  FROM (SELECT clock_timestamp() AS t) now WHERE resource = $1
RETURNING ` + leaseCols + `, (extract(epoch FROM now.t) * 1000000)::bigint`,
	// Never shorter: a holder may already have been given the later
	// deadline.
	LeaseRenew: `
UPDATE fencegate_lease SET expires_at = GREATEST(expires_at, now.t + $4::bigint * interval '1 microsecond')
  FROM (SELECT clock_timestamp() AS t) now
 WHERE resource = $1 AND holder = $2 AND fence = $3 AND NOT released AND expires_at > now.t
RETURNING ` + leaseCols + `, (extract(epoch FROM now.t) * 1000000)::bigint`,
	LeaseRelease: `
UPDATE fencegate_lease SET released = true, expires_at = LEAST(expires_at, clock_timestamp())
 WHERE resource = $1 AND holder = $2 AND fence = $3 AND NOT released AND expires_at > clock_timestamp()`,
	RequestInsert: `
INSERT INTO fencegate_request (resource, request_id, fence) VALUES ($1, $2, $3)
ON CONFLICT (resource, request_id) DO NOTHING`,
	RequestFence: `SELECT fence FROM fencegate_request WHERE resource = $1 AND request_id = $2`,
	// Pruning (made_at dates the requests), by key, in batches.
	RequestPrune: `
DELETE FROM fencegate_request WHERE (resource, request_id) IN (
  SELECT resource, request_id FROM fencegate_request
   WHERE made_at < clock_timestamp() - $1::bigint * interval '1 microsecond' LIMIT $2)`,
	WaiterPruneAll: `
DELETE FROM fencegate_waiter WHERE seq IN (
  SELECT seq FROM fencegate_waiter WHERE expires_at <= clock_timestamp() LIMIT $1)`,
	RejectionPrune: `
DELETE FROM fencegate_rejection WHERE seq IN (
  SELECT seq FROM fencegate_rejection
   WHERE seq <= (SELECT max(seq) FROM fencegate_rejection) - $1 ORDER BY seq LIMIT $2)`,
	WaiterTouch: `
UPDATE fencegate_waiter SET expires_at = now.t + $3::bigint * interval '1 microsecond', touched_at = now.t
  FROM (SELECT clock_timestamp() AS t) now WHERE resource = $1 AND seq = $2`,
	WaiterFirst: `
SELECT min(seq) FROM fencegate_waiter
 WHERE resource = $1 AND (expires_at > clock_timestamp() OR seq = $2)`,
	WaiterDelete: `DELETE FROM fencegate_waiter WHERE seq = $1`,
	SemaphoreGet: `SELECT permits FROM fencegate_semaphore WHERE name = $1`,
	SemaphoreSet: `
INSERT INTO fencegate_semaphore (name, permits, updated_at) VALUES ($1, $2, clock_timestamp())
ON CONFLICT (name) DO UPDATE SET permits = EXCLUDED.permits, updated_at = EXCLUDED.updated_at`,
	WaiterList: `
SELECT ` + waiterCols + `
  FROM fencegate_waiter WHERE resource = $1 AND expires_at > clock_timestamp() ORDER BY seq`,
	WaiterHead: `
SELECT ` + waiterCols + `
  FROM fencegate_waiter WHERE resource = $1 AND expires_at > clock_timestamp() ORDER BY seq LIMIT 1
   FOR UPDATE`,
}
