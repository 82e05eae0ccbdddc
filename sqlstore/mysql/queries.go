package mysql

// The SQL text of the MySQL/MariaDB dialect, in the subset MySQL 8 and
// MariaDB 10.6+ share (no RETURNING, no sequences, no row alias in ON
// DUPLICATE KEY UPDATE). Every argument is bound; times come back as integer
// microseconds since the Unix epoch.

const (
	// now is the database's clock: the statement's start, in UTC, to the
	// microsecond. It is the same value everywhere in one statement.
	now = `UTC_TIMESTAMP(6)`
	// epoch turns a DATETIME(6) into microseconds since the Unix epoch,
	// without the session's time zone.
	epoch = `TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', `

	leaseCols  = `resource, holder, fence, request_id, ` + epoch + `granted_at), ` + epoch + `expires_at), released`
	waiterCols = `seq, resource, holder, ` + epoch + `expires_at), COALESCE(request_id, ''), COALESCE(term_us, 0),
  COALESCE(` + epoch + `touched_at), 0)`
	// fromMicros is a time of microseconds since the Unix epoch, in UTC
	// whatever the session's time zone.
	fromMicros = `TIMESTAMPADD(MICROSECOND, ?, TIMESTAMP'1970-01-01 00:00:00')`
	floorCols  = `resource, floor, holder, ` + epoch + `updated_at)`
)

// The fence check is the SQL protocol's (migrations/mysql/00002,
// docs/SQL.md): fencegate_raise runs fencegate_raise_floor, the one floor
// rule fencegate_check and fencegate_admit run for clients in any language.
// Its upsert takes an exclusive lock on the floor's record whether or not it
// changes anything, so an equal fence (every write of a lease after its
// first) holds the same lock a raise needs: the floor cannot rise while such
// a writer is in flight, and writers of a resource queue on that record.
// Arguments: resource, holder, fence, verify issued → admitted, issued,
// floor, floor_holder.
const (
	floorRaiseCall = `CALL fencegate_raise(?, ?, ?, ?)`

	floorGet  = `SELECT ` + floorCols + ` FROM fencegate_floor WHERE resource = ?`
	floorList = `SELECT ` + floorCols + ` FROM fencegate_floor ORDER BY resource`
)

const (
	// logRefusalCall is the refusal's record as every client writes it
	// after the rollback: the database reads the floor again and records
	// only a real refusal. Arguments: resource, holder, fence → logged,
	// seq, floor, floor_holder, not_issued.
	logRefusalCall  = `CALL fencegate_log_refusal(?, ?, ?)`
	rejectionInsert = `
INSERT INTO fencegate_rejection (resource, fence, holder, floor, floor_holder, not_issued, at)
VALUES (?, ?, ?, ?, ?, ?, ` + now + `)`
	rejectionAt = `SELECT ` + epoch + `at) FROM fencegate_rejection WHERE seq = ?`

	rejectionCols = `seq, resource, fence, holder, floor, floor_holder, not_issued, ` + epoch + `at)`
	// Arguments: resource or '', the same, after seq, limit.
	rejectionList = `
SELECT ` + rejectionCols + ` FROM fencegate_rejection
 WHERE (? = '' OR resource = ?) AND seq > ?
 ORDER BY seq LIMIT ?`
	rejectionListDesc = `
SELECT ` + rejectionCols + ` FROM fencegate_rejection
 WHERE (? = '' OR resource = ?) AND seq > ?
 ORDER BY seq DESC LIMIT ?`
)

const (
	// The session's lock wait timeout, in whole seconds, is saved in a user
	// variable before it first changes and put back before the transaction
	// ends, so a pooled connection goes back as it came. (An unset user
	// variable is a string NULL, so COALESCE would make the saved value a
	// string, which the server refuses to assign back: hence the CAST.)
	lockTimeoutSet = `
SET @fencegate_lock_wait = CAST(COALESCE(@fencegate_lock_wait, @@SESSION.innodb_lock_wait_timeout) AS UNSIGNED),
    SESSION innodb_lock_wait_timeout = ?`
	lockTimeoutRestore = `
SET SESSION innodb_lock_wait_timeout = CAST(COALESCE(@fencegate_lock_wait, @@SESSION.innodb_lock_wait_timeout) AS UNSIGNED),
    @fencegate_lock_wait = NULL`
)

const (
	// The counter row's lock is held until the granting transaction ends, so
	// grants take fences one at a time, in commit order.
	fenceNext    = `UPDATE fencegate_fence_seq SET last = LAST_INSERT_ID(last + 1) WHERE id = 1`
	fenceAtLeast = `UPDATE fencegate_fence_seq SET last = GREATEST(last, ?) WHERE id = 1`
)

const (
	leaseGetForUpdate = `SELECT ` + leaseCols + ` FROM fencegate_lease WHERE resource = ? FOR UPDATE`
	// clock is read after leaseGetForUpdate's lock wait: UTC_TIMESTAMP is
	// fixed when a statement starts, and Now must not be older than the row.
	clock     = `SELECT ` + epoch + now + `)`
	leaseGet  = `SELECT ` + leaseCols + `, ` + epoch + now + `) FROM fencegate_lease WHERE resource = ?`
	leaseList = `SELECT ` + leaseCols + `, ` + epoch + now + `) FROM fencegate_lease ORDER BY resource`
	// leaseRead reads back a row the transaction just wrote (MySQL has no
	// RETURNING); the caller knows the clock of the write.
	leaseRead = `SELECT ` + leaseCols + ` FROM fencegate_lease WHERE resource = ?`

	// Arguments: resource, holder, fence, request id, ttl µs. A row created
	// first by a concurrent grant is left alone (0 rows affected).
	leaseInsert = `
INSERT INTO fencegate_lease (resource, holder, fence, request_id, granted_at, expires_at, released)
VALUES (?, ?, ?, ?, ` + now + `, ` + now + ` + INTERVAL ? MICROSECOND, FALSE)
ON DUPLICATE KEY UPDATE resource = resource`
	// Arguments: holder, fence, request id, ttl µs, resource.
	// Arguments: holder, fence, request id, granted µs, expires µs,
	// resource: a hand-over's grant, dated by the caller.
	leaseReplaceDated = `
UPDATE fencegate_lease
   SET holder = ?, fence = ?, request_id = ?, granted_at = ` + fromMicros + `,
       expires_at = ` + fromMicros + `, released = FALSE
 WHERE resource = ?`
	leaseReplace = `
UPDATE fencegate_lease
   SET holder = ?, fence = ?, request_id = ?, granted_at = ` + now + `,
       expires_at = ` + now + ` + INTERVAL ? MICROSECOND, released = FALSE
 WHERE resource = ?`
	// The renewal and the release are the SQL protocol's rules
	// (fencegate_renew_rule, fencegate_release_rule), as the Go driver
	// calls them. Arguments: resource, holder, fence, ttl µs → the lease
	// columns and the renewal's clock, no row when not renewed; resource,
	// holder, fence → released.
	leaseRenewCall = `CALL fencegate_renew_lease(?, ?, ?, ?)`
	// The acquisition of one resource is the SQL protocol's rule
	// (fencegate_claim_one), as the Go driver calls it. Arguments:
	// resource, holder, ttl µs, request id → status, fence, floor,
	// floor_holder, the lease columns (NULL unless granted, retried or
	// held) and the claim's clock.
	acquireCall = `CALL fencegate_acquire_lease(?, ?, ?, ?)`
	// In a caller's transaction, a grant the floor refused is rolled back
	// to a savepoint taken before it.
	acquireSavepoint = `SAVEPOINT fencegate_acquire`
	acquireRollback  = `ROLLBACK TO SAVEPOINT fencegate_acquire`
	acquireRelease   = `RELEASE SAVEPOINT fencegate_acquire`
	leaseReleaseCall = `CALL fencegate_release_lease(?, ?, ?)`
	// Arguments: resource, request id, fence.
	requestInsert = `
INSERT INTO fencegate_request (resource, request_id, fence, made_at) VALUES (?, ?, ?, ` + now + `)
ON DUPLICATE KEY UPDATE resource = resource`
	// The prunes (sqlstore.Executor.Prune). Arguments: age µs, limit;
	// limit; the highest seq to delete, limit.
	requestPrune   = `DELETE FROM fencegate_request WHERE made_at < ` + now + ` - INTERVAL ? MICROSECOND LIMIT ?`
	waiterPruneAll = `DELETE FROM fencegate_waiter WHERE expires_at <= ` + now + ` LIMIT ?`
	rejectionMax   = `SELECT coalesce(max(seq), 0) FROM fencegate_rejection`
	rejectionPrune = `DELETE FROM fencegate_rejection WHERE seq <= ? ORDER BY seq LIMIT ?`
	requestFence   = `SELECT fence FROM fencegate_request WHERE resource = ? AND request_id = ?`
)

// The waiter queue. MySQL has no RETURNING: a waiter's place is the
// AUTO_INCREMENT id of its insert.
const (
	waiterPrune = `DELETE FROM fencegate_waiter WHERE resource = ? AND expires_at <= ` + now
	// Arguments: resource, holder, ttl µs, request id or NULL, term µs.
	// now is the statement's start: the expiry and touched_at share it.
	waiterInsert = `
INSERT INTO fencegate_waiter (resource, holder, expires_at, request_id, term_us, touched_at)
VALUES (?, ?, ` + now + ` + INTERVAL ? MICROSECOND, ?, ?, ` + now + `)`
	waiterTouch = `UPDATE fencegate_waiter SET expires_at = ` + now + ` + INTERVAL ? MICROSECOND, touched_at = ` + now + ` WHERE resource = ? AND seq = ?`
	// waiterFirst counts the waiter itself, so that an update that changed
	// nothing (clientFoundRows is off) is not mistaken for a missing row.
	waiterFirst = `
SELECT COALESCE(MIN(seq), 0), COALESCE(SUM(seq = ?), 0) FROM fencegate_waiter
 WHERE resource = ? AND (expires_at > ` + now + ` OR seq = ?)`
	waiterDelete = `DELETE FROM fencegate_waiter WHERE seq = ?`
	semaphoreGet = `SELECT permits FROM fencegate_semaphore WHERE name = ?`
	semaphoreSet = `INSERT INTO fencegate_semaphore (name, permits) VALUES (?, ?) ON DUPLICATE KEY UPDATE permits = VALUES(permits)`
	waiterList   = `
SELECT ` + waiterCols + ` FROM fencegate_waiter
 WHERE resource = ? AND expires_at > ` + now + ` ORDER BY seq`
	waiterHead = `
SELECT ` + waiterCols + ` FROM fencegate_waiter
 WHERE resource = ? AND expires_at > ` + now + ` ORDER BY seq LIMIT 1 FOR UPDATE`
)

// commit is sent as a statement, under the caller's ctx (see Driver.Commit).
const commit = `COMMIT`

const (
	// sessionSettings reads back, on every new connection, the session
	// variables fencegate's statements depend on (judged by checkSession).
	sessionSettings = `
SELECT @@session.autocommit, @@session.completion_type, @@session.sql_log_bin,
       @@session.sql_mode, @@session.sql_select_limit, @@session.insert_id`
	// clockReset puts the session's clock back on the server's. A DSN
	// parameter's value can carry a hidden "timestamp = …" that freezes
	// UTC_TIMESTAMP at the moment of connecting, which no read-back can
	// tell from the real clock.
	clockReset = `SET SESSION timestamp = DEFAULT`
)
