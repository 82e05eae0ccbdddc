package sqlite

import "github.com/fencegate/fencegate/sqlstore/internal/sqlexec"

const (
	// julianday('now') counts whole milliseconds (as unixepoch('subsec')
	// does, which needs SQLite 3.42, newer than Debian 12's 3.40 that
	// clients in other languages run these statements on); rounding to
	// whole milliseconds keeps float error out of the integer.
	sqliteWall = `(CAST(round((julianday('now') - 2440587.5) * 86400000) AS INTEGER) * 1000)`
	// sqliteClock is the high-water mark of fencegate_clock, which ClockTick has just raised to the wall clock: the time
	// every grant, renewal, release and expiry is judged by, never below
	// one judged before. sqliteNow, for the times the other statements
	// stamp and report, is never below it either.
	sqliteClock      = `(SELECT hw FROM fencegate_clock WHERE id = 1)`
	sqliteNow        = `max(` + sqliteWall + `, coalesce(` + sqliteClock + `, 0))`
	sqliteLeaseCols  = `resource, holder, fence, request_id, granted_at, expires_at, released`
	sqliteWaiterCols = `seq, resource, holder, expires_at, coalesce(request_id, ''), coalesce(term_us, 0), coalesce(touched_at, 0)`
	floorSetOnUpsert = `
ON CONFLICT (resource) DO UPDATE SET
  floor      = CASE WHEN excluded.floor > f.floor THEN excluded.floor ELSE f.floor END,
  holder     = CASE WHEN excluded.floor >= f.floor THEN excluded.holder ELSE f.holder END,
  updated_at = CASE WHEN excluded.floor > f.floor THEN excluded.updated_at ELSE f.updated_at END
RETURNING floor, holder`
)

// SQLite numbers its parameters ?1, ?2 so that a reused argument binds once.
var queries = &sqlexec.Queries{
	FloorRaise: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
VALUES (?1, ?2, ?3, ` + sqliteNow + `)` + floorSetOnUpsert,
	// INSERT … SELECT needs its WHERE clause before ON CONFLICT to parse.
	FloorRaiseVerified: `
INSERT INTO fencegate_floor AS f (resource, floor, holder, updated_at)
SELECT l.resource, l.fence, l.holder, ` + sqliteNow + `
  FROM fencegate_lease l
 WHERE l.resource = ?1 AND l.fence = ?2 AND l.holder = ?3` + floorSetOnUpsert,
	// SQLite's transaction holds the write lock from BEGIN, so reading
	// first costs no race; it saves rewriting the floor's page when the
	// fence is the floor already (every write of a lease but its first).
	FloorHeld: `SELECT floor, holder FROM fencegate_floor WHERE resource = ?1 AND floor = ?2 AND holder = ?3`,
	FloorHeldVerified: `
SELECT floor, holder FROM fencegate_floor
 WHERE resource = ?1 AND floor = ?2 AND holder = ?3
   AND EXISTS (SELECT 1 FROM fencegate_lease l WHERE l.resource = ?1 AND l.fence = ?2 AND l.holder = ?3)`,
	FloorGet:  `SELECT resource, floor, holder, updated_at FROM fencegate_floor WHERE resource = ?1`,
	FloorList: `SELECT resource, floor, holder, updated_at FROM fencegate_floor ORDER BY resource`,
	RejectionInsert: `
INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ` + sqliteNow + `)
RETURNING seq, at`,
	RejectionList: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, at
  FROM fencegate_rejection
 WHERE (?1 = '' OR resource = ?1) AND seq > ?2
 ORDER BY seq LIMIT ?3`,
	RejectionListDesc: `
SELECT seq, resource, fence, holder, floor, floor_holder, not_issued, at
  FROM fencegate_rejection
 WHERE (?1 = '' OR resource = ?1) AND seq > ?2
 ORDER BY seq DESC LIMIT ?3`,
	FenceNext:         `UPDATE fencegate_fence_seq SET last = last + 1 WHERE id = 1 RETURNING last`,
	FenceAtLeast:      `UPDATE fencegate_fence_seq SET last = max(last, ?1 - 1) WHERE id = 1`,
	LeaseGetForUpdate: `SELECT ` + sqliteLeaseCols + `, ` + sqliteClock + ` FROM fencegate_lease WHERE resource = ?1`,
	LeaseGet:          `SELECT ` + sqliteLeaseCols + `, ` + sqliteNow + ` FROM fencegate_lease WHERE resource = ?1`,
	LeaseList:         `SELECT ` + sqliteLeaseCols + `, ` + sqliteNow + ` FROM fencegate_lease ORDER BY resource`,
	LeaseLiveBelow: `
SELECT ` + sqliteLeaseCols + `, ` + sqliteClock + ` FROM fencegate_lease
 WHERE resource > ?1 AND resource < ?2 AND NOT released AND expires_at > ` + sqliteClock + `
 ORDER BY resource LIMIT 1`,
	LeaseInsert: `
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
VALUES (?1, ?2, ?3, ?4, ` + sqliteClock + `, ` + sqliteClock + ` + ?5, 0)
ON CONFLICT (resource) DO NOTHING
RETURNING ` + sqliteLeaseCols + `, granted_at`,
	LeaseReplaceDated: `
UPDATE fencegate_lease SET holder = ?2, fence = ?3, request_id = ?4, granted_at = ?5, expires_at = ?6, released = 0
 WHERE resource = ?1
RETURNING ` + sqliteLeaseCols + `, ` + sqliteNow,
	LeaseReplace: `
UPDATE fencegate_lease SET holder = ?2, fence = ?3, request_id = ?4, granted_at = ` + sqliteClock + `,
       expires_at = ` + sqliteClock + ` + ?5, released = 0
 WHERE resource = ?1
RETURNING ` + sqliteLeaseCols + `, granted_at`,
	// A renewal never ends a term earlier than it was (max): a holder may
	// already have been given the later deadline.
	LeaseRenew: `
UPDATE fencegate_lease SET expires_at = max(expires_at, ` + sqliteClock + ` + ?4)
 WHERE resource = ?1 AND holder = ?2 AND fence = ?3 AND NOT released AND expires_at > ` + sqliteClock + `
RETURNING ` + sqliteLeaseCols + `, ` + sqliteClock,
	LeaseRelease: `
UPDATE fencegate_lease SET released = 1, expires_at = min(expires_at, ` + sqliteClock + `)
 WHERE resource = ?1 AND holder = ?2 AND fence = ?3 AND NOT released AND expires_at > ` + sqliteClock,
	ClockTick: `UPDATE fencegate_clock SET hw = max(hw, ` + sqliteWall + `) WHERE id = 1`,
	RequestInsert: `
INSERT INTO fencegate_request (resource, request_id, fence, made_at) VALUES (?1, ?2, ?3, ` + sqliteNow + `)
ON CONFLICT (resource, request_id) DO NOTHING`,
	RequestPrune: `
DELETE FROM fencegate_request WHERE (resource, request_id) IN (
  SELECT resource, request_id FROM fencegate_request WHERE made_at < ` + sqliteNow + ` - ?1 LIMIT ?2)`,
	WaiterPruneAll: `
DELETE FROM fencegate_waiter WHERE seq IN (
  SELECT seq FROM fencegate_waiter WHERE expires_at <= ` + sqliteNow + ` LIMIT ?1)`,
	RejectionPrune: `
DELETE FROM fencegate_rejection WHERE seq IN (
  SELECT seq FROM fencegate_rejection
   WHERE seq <= (SELECT max(seq) FROM fencegate_rejection) - ?1 ORDER BY seq LIMIT ?2)`,
	RequestFence: `SELECT fence FROM fencegate_request WHERE resource = ?1 AND request_id = ?2`,
	WaiterPrune:  `DELETE FROM fencegate_waiter WHERE resource = ?1 AND expires_at <= ` + sqliteNow,
	WaiterInsert: `
INSERT INTO fencegate_waiter (resource, holder, expires_at, request_id, term_us, touched_at)
SELECT ?1, ?2, now.t + ?3, ?4, ?5, now.t FROM (SELECT ` + sqliteNow + ` AS t) AS now
RETURNING seq`,
	WaiterTouch: `
UPDATE fencegate_waiter SET expires_at = now.t + ?3, touched_at = now.t
  FROM (SELECT ` + sqliteNow + ` AS t) AS now
 WHERE resource = ?1 AND seq = ?2`,
	WaiterFirst: `
SELECT min(seq) FROM fencegate_waiter
 WHERE resource = ?1 AND (expires_at > ` + sqliteNow + ` OR seq = ?2)`,
	WaiterDelete: `DELETE FROM fencegate_waiter WHERE seq = ?1`,
	SemaphoreGet: `SELECT permits FROM fencegate_semaphore WHERE name = ?1`,
	SemaphoreSet: `
INSERT INTO fencegate_semaphore (name, permits) VALUES (?1, ?2)
ON CONFLICT (name) DO UPDATE SET permits = excluded.permits`,
	WaiterList: `
SELECT ` + sqliteWaiterCols + ` FROM fencegate_waiter
 WHERE resource = ?1 AND expires_at > ` + sqliteNow + ` ORDER BY seq`,
	// The write transaction holds the database: no row lock to take.
	WaiterHead: `
SELECT ` + sqliteWaiterCols + ` FROM fencegate_waiter
 WHERE resource = ?1 AND expires_at > ` + sqliteNow + ` ORDER BY seq LIMIT 1`,
}

// settingsQuery reads back what a connection runs with, whatever the DSN
// said and in whichever order modernc applied it (it sorts _pragma values
// and applies _journal and _sync after them): the main database's journal
// mode, synchronous level and locking mode. A VFS that cannot share the
// WAL index (unix-none, nolock=1, immutable=1) leaves journal_mode at
// "delete" however WAL was asked for; DSN refuses those by name.
const settingsQuery = `SELECT j.journal_mode, s.synchronous, l.locking_mode
  FROM pragma_journal_mode j, pragma_synchronous s, pragma_locking_mode l`
