package sqlstore

import "fmt"

// queries is the SQL text of one dialect. Every statement binds its
// arguments; times come back as integer microseconds since the Unix epoch so
// that one scanner serves both dialects.
type queries struct {
	floorRaise         string // $1 resource, $2 fence, $3 holder → floor, holder
	floorRaiseVerified string // same, only for an issued lease
	floorHeld          string // $1..$3 as floorRaise → floor, holder when the floor already is (fence, holder); empty if floorRaise covers it
	floorHeldVerified  string // same, only for an issued lease
	floorGet           string // $1 resource
	floorList          string
	rejectionInsert    string // $1..$6 → seq, at
	rejectionList      string // $1 resource or '', $2 after seq, $3 limit
	rejectionListDesc  string
	setLockTimeout     string // $1 duration text such as "2000ms"; empty if not supported
	fenceNext          string
	fenceLock          string // run before fenceAtLeast; empty if not needed
	fenceAtLeast       string // $1 min
	leaseGetForUpdate  string // $1 resource
	leaseGet           string // $1 resource
	leaseList          string
	leaseInsert        string // $1 resource, $2 holder, $3 fence, $4 request id, $5 ttl µs
	leaseReplace       string // same
	leaseRenew         string // $1 resource, $2 holder, $3 fence, $4 ttl µs
	leaseRelease       string // $1 resource, $2 holder, $3 fence
	requestInsert      string // $1 resource, $2 request id, $3 fence
	requestFence       string // $1 resource, $2 request id → fence
}

// leaseCols is the column list every lease query returns, in scan order,
// followed by the database's clock.
const (
	pgLeaseCols = `resource, holder, fence, request_id,
  (extract(epoch FROM granted_at) * 1000000)::bigint,
  (extract(epoch FROM expires_at) * 1000000)::bigint,
  released`
	pgNow = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

	// unixepoch('subsec') has millisecond precision; rounding to whole
	// milliseconds keeps float error out of the integer.
	sqliteNow        = `(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)`
	sqliteLeaseCols  = `resource, holder, fence, request_id, granted_at, expires_at, released`
	floorSetOnUpsert = `
ON CONFLICT (resource) DO UPDATE SET
  floor      = CASE WHEN excluded.floor > f.floor THEN excluded.floor ELSE f.floor END,
  holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
  updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
RETURNING floor, holder`
)

// The Postgres floor statement has two paths in one round trip.
//
// A fence equal to the floor, from the holder that set it (every write of a
// lease after its first), only locks the floor row (held): no new row
// version, no index work, and a plain row-lock queue. The lock is FOR NO KEY
// UPDATE: it conflicts with the raise's own lock and with itself, so the
// floor cannot rise while such a writer is in flight (a write under N never
// commits after a write under N+1), and writers of a resource queue in
// arrival order, the way an advisory lock queues them. (FOR SHARE would let
// equal-fence writers overlap, but new share lockers join while a raise
// waits, so a stale holder that keeps writing could hold the raise off
// indefinitely.)
//
// Anything else (no floor yet, a higher fence, a lower one, another holder)
// takes the upsert (raised), which writes max(floor, fence). The upsert used
// to serve every write: under 64 concurrent writers of one resource each
// wrote a new row version, and each waiter, on finding the row updated,
// restarted its INSERT … ON CONFLICT and queued again from the back.
//
// If held waits on a raise that commits, READ COMMITTED re-checks its WHERE
// against the new row, finds floor ≠ fence, and returns nothing; raised then
// runs and reports the higher floor (a refusal).
const (
	pgFloorCTETemplate = `
WITH held AS MATERIALIZED (
  SELECT floor, holder FROM fencegate_floor
   WHERE resource = $1 AND floor = $2 AND holder = $3%s
     FOR NO KEY UPDATE
), raised AS (
  INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
  %s
  ON CONFLICT (resource) DO UPDATE SET
    floor      = GREATEST(f.floor, excluded.floor),
    holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
    updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
  RETURNING floor, holder
)`
	pgVerifiedCond = `
     AND EXISTS (SELECT 1 FROM fencegate_lease l WHERE l.resource = $1 AND l.fence = $2 AND l.holder = $3)`
	pgRaiseValues = `SELECT $1, $2, $3, clock_timestamp() WHERE NOT EXISTS (SELECT FROM held)`
	pgRaiseIssued = `SELECT l.resource, l.fence, l.holder, clock_timestamp()
    FROM fencegate_lease l
   WHERE l.resource = $1 AND l.fence = $2 AND l.holder = $3 AND NOT EXISTS (SELECT FROM held)`
	pgFloorResult = `
SELECT floor, holder FROM held UNION ALL SELECT floor, holder FROM raised`
)

var (
	pgFloorCTE         = fmt.Sprintf(pgFloorCTETemplate, "", pgRaiseValues)
	pgFloorCTEVerified = fmt.Sprintf(pgFloorCTETemplate, pgVerifiedCond, pgRaiseIssued)

	pgFloorRaise         = pgFloorCTE + pgFloorResult
	pgFloorRaiseVerified = pgFloorCTEVerified + pgFloorResult
)

var postgresQueries = &queries{
	floorRaise:         pgFloorRaise,
	floorRaiseVerified: pgFloorRaiseVerified,
	floorGet: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor WHERE resource = $1`,
	floorList: `
SELECT resource, floor, holder, (extract(epoch FROM updated_at) * 1000000)::bigint
  FROM fencegate_floor ORDER BY resource`,
	rejectionInsert: `
INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp())
RETURNING seq, (extract(epoch FROM at) * 1000000)::bigint`,
	rejectionList: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, (extract(epoch FROM at) * 1000000)::bigint
  FROM fencegate_rejection
 WHERE ($1 = '' OR resource = $1) AND seq > $2
 ORDER BY seq LIMIT $3`,
	rejectionListDesc: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, (extract(epoch FROM at) * 1000000)::bigint
  FROM fencegate_rejection
 WHERE ($1 = '' OR resource = $1) AND seq > $2
 ORDER BY seq DESC LIMIT $3`,
	setLockTimeout: `SELECT set_config('lock_timeout', $1, true)`,
	fenceNext:      `SELECT nextval('fencegate_fence_seq')`,
	// ALTER SEQUENCE takes a lock that nextval waits for, so no fence is
	// issued between reading the sequence and moving it.
	fenceLock: `ALTER SEQUENCE fencegate_fence_seq CACHE 1`,
	fenceAtLeast: `
SELECT setval('fencegate_fence_seq', $1::bigint - 1, true)
  FROM fencegate_fence_seq
 WHERE (CASE WHEN is_called THEN last_value + 1 ELSE last_value END) < $1::bigint`,
	// The CTE locks first; the outer clock_timestamp() is read after any
	// wait for the lock, so Now is never older than the row.
	leaseGetForUpdate: `
WITH l AS MATERIALIZED (SELECT * FROM fencegate_lease WHERE resource = $1 FOR UPDATE)
SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM l`,
	leaseGet:  `SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM fencegate_lease WHERE resource = $1`,
	leaseList: `SELECT ` + pgLeaseCols + `, ` + pgNow + ` FROM fencegate_lease ORDER BY resource`,
	leaseInsert: `
WITH now AS (SELECT clock_timestamp() AS t)
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
SELECT $1, $2, $3, $4, now.t, now.t + $5::bigint * interval '1 microsecond', false FROM now
ON CONFLICT (resource) DO NOTHING
RETURNING ` + pgLeaseCols + `, (extract(epoch FROM granted_at) * 1000000)::bigint`,
	leaseReplace: `
WITH now AS (SELECT clock_timestamp() AS t)
UPDATE fencegate_lease SET holder = $2, fence = $3, request_id = $4, granted_at = now.t,
       expires_at = now.t + $5::bigint * interval '1 microsecond', released = false
  FROM now WHERE resource = $1
RETURNING ` + pgLeaseCols + `, (extract(epoch FROM now.t) * 1000000)::bigint`,
	leaseRenew: `
WITH now AS (SELECT clock_timestamp() AS t)
UPDATE fencegate_lease SET expires_at = now.t + $4::bigint * interval '1 microsecond'
  FROM now
 WHERE resource = $1 AND holder = $2 AND fence = $3 AND NOT released AND expires_at > now.t
RETURNING ` + pgLeaseCols + `, (extract(epoch FROM now.t) * 1000000)::bigint`,
	leaseRelease: `
UPDATE fencegate_lease SET released = true, expires_at = LEAST(expires_at, clock_timestamp())
 WHERE resource = $1 AND holder = $2 AND fence = $3 AND NOT released AND expires_at > clock_timestamp()`,
	requestInsert: `
INSERT INTO fencegate_request (resource, request_id, fence) VALUES ($1, $2, $3)
ON CONFLICT (resource, request_id) DO NOTHING`,
	requestFence: `SELECT fence FROM fencegate_request WHERE resource = $1 AND request_id = $2`,
}

// SQLite numbers its parameters ?1, ?2 so that a reused argument binds once.
var sqliteQueries = &queries{
	floorRaise: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
VALUES (?1, ?2, ?3, ` + sqliteNow + `)` + floorSetOnUpsert,
	// INSERT … SELECT needs its WHERE clause before ON CONFLICT to parse.
	floorRaiseVerified: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
SELECT l.resource, l.fence, l.holder, ` + sqliteNow + `
  FROM fencegate_lease l
 WHERE l.resource = ?1 AND l.fence = ?2 AND l.holder = ?3` + floorSetOnUpsert,
	// SQLite's transaction holds the write lock from BEGIN, so reading
	// first costs no race; it saves rewriting the floor's page when the
	// fence is the floor already (every write of a lease but its first).
	floorHeld: `SELECT floor, holder FROM fencegate_floor WHERE resource = ?1 AND floor = ?2 AND holder = ?3`,
	floorHeldVerified: `
SELECT floor, holder FROM fencegate_floor
 WHERE resource = ?1 AND floor = ?2 AND holder = ?3
   AND EXISTS (SELECT 1 FROM fencegate_lease l WHERE l.resource = ?1 AND l.fence = ?2 AND l.holder = ?3)`,
	floorGet:  `SELECT resource, floor, holder, updated_at FROM fencegate_floor WHERE resource = ?1`,
	floorList: `SELECT resource, floor, holder, updated_at FROM fencegate_floor ORDER BY resource`,
	rejectionInsert: `
INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ` + sqliteNow + `)
RETURNING seq, at`,
	rejectionList: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, at
  FROM fencegate_rejection
 WHERE (?1 = '' OR resource = ?1) AND seq > ?2
 ORDER BY seq LIMIT ?3`,
	rejectionListDesc: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, at
  FROM fencegate_rejection
 WHERE (?1 = '' OR resource = ?1) AND seq > ?2
 ORDER BY seq DESC LIMIT ?3`,
	fenceNext:         `UPDATE fencegate_fence_seq SET last = last + 1 WHERE id = 1 RETURNING last`,
	fenceAtLeast:      `UPDATE fencegate_fence_seq SET last = max(last, ?1 - 1) WHERE id = 1`,
	leaseGetForUpdate: `SELECT ` + sqliteLeaseCols + `, ` + sqliteNow + ` FROM fencegate_lease WHERE resource = ?1`,
	leaseGet:          `SELECT ` + sqliteLeaseCols + `, ` + sqliteNow + ` FROM fencegate_lease WHERE resource = ?1`,
	leaseList:         `SELECT ` + sqliteLeaseCols + `, ` + sqliteNow + ` FROM fencegate_lease ORDER BY resource`,
	leaseInsert: `
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
VALUES (?1, ?2, ?3, ?4, ` + sqliteNow + `, ` + sqliteNow + ` + ?5, 0)
ON CONFLICT (resource) DO NOTHING
RETURNING ` + sqliteLeaseCols + `, granted_at`,
	leaseReplace: `
UPDATE fencegate_lease SET holder = ?2, fence = ?3, request_id = ?4, granted_at = ` + sqliteNow + `,
       expires_at = ` + sqliteNow + ` + ?5, released = 0
 WHERE resource = ?1
RETURNING ` + sqliteLeaseCols + `, granted_at`,
	leaseRenew: `
UPDATE fencegate_lease SET expires_at = ` + sqliteNow + ` + ?4
 WHERE resource = ?1 AND holder = ?2 AND fence = ?3 AND NOT released AND expires_at > ` + sqliteNow + `
RETURNING ` + sqliteLeaseCols + `, ` + sqliteNow,
	leaseRelease: `
UPDATE fencegate_lease SET released = 1, expires_at = min(expires_at, ` + sqliteNow + `)
 WHERE resource = ?1 AND holder = ?2 AND fence = ?3 AND NOT released AND expires_at > ` + sqliteNow,
	requestInsert: `
INSERT INTO fencegate_request (resource, request_id, fence) VALUES (?1, ?2, ?3)
ON CONFLICT (resource, request_id) DO NOTHING`,
	requestFence: `SELECT fence FROM fencegate_request WHERE resource = ?1 AND request_id = ?2`,
}
