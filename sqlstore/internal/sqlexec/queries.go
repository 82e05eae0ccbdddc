package sqlexec

import "cmp"

// Queries is the SQL text of one dialect. Every statement binds its
// arguments; times come back as integer microseconds since the Unix epoch so
// that one scanner serves both dialects.
type Queries struct {
	FloorRaise         string // $1 resource, $2 fence, $3 holder → floor, holder
	FloorRaiseVerified string // same, only for an issued lease
	FloorHeld          string // $1..$3 as floorRaise → floor, holder when the floor already is (fence, holder); empty if floorRaise covers it
	FloorHeldVerified  string // same, only for an issued lease
	FloorGet           string // $1 resource
	FloorList          string
	RejectionInsert    string // $1..$6 → seq, at
	RejectionList      string // $1 resource or '', $2 after seq, $3 limit
	RejectionListDesc  string
	SetLockTimeout     string // $1 duration text such as "2000ms"; empty if not supported
	FenceNext          string
	FenceLock          string // run before fenceAtLeast; empty if not needed
	FenceAtLeast       string // $1 min
	LeaseGetForUpdate  string // $1 resource
	LeaseGet           string // $1 resource
	LeaseList          string
	LeaseInsert        string // $1 resource, $2 holder, $3 fence, $4 request id, $5 ttl µs
	LeaseReplace       string // same
	// LeaseReplaceDated is LeaseReplace dated by the caller (a hand-over):
	// $1..$4 as LeaseReplace, $5 granted µs, $6 expires µs.
	LeaseReplaceDated string
	// LeaseHandOver, when set, is sqlstore.Executor.LeaseHandOver in one
	// statement (without it, the shared steps): $1 resource, $2 holder, $3
	// fence → released, waiter seq (0 for none), and the new generation's
	// holder, fence, request id, granted µs, expires µs, and the clock.
	LeaseHandOver string
	// WaiterHead is the first live waiter of $1, its row locked, with
	// WaiterList's columns.
	WaiterHead   string
	LeaseRenew   string // $1 resource, $2 holder, $3 fence, $4 ttl µs
	LeaseRelease string // $1 resource, $2 holder, $3 fence
	// LeaseRenewBatch, when set, renews many leases in one statement
	// (sqlstore.Executor.LeaseRenewBatch; without it, the shared steps): $1 resources, $2 holders, $3 fences,
	// $4 ttls µs, as arrays → the request's ordinality (from 1), then the
	// lease columns and clock, for each lease renewed.
	LeaseRenewBatch string
	// LeaseReleaseAutocommit, when set, replaces LeaseRelease in an
	// executor outside any caller's transaction (Autocommit).
	LeaseReleaseAutocommit string
	// LeaseReleaseFirst, when set, is LeaseRelease returning one row when
	// it released the lease: the lowest live waiter's seq of $1, 0 when none
	// (sqlstore.LeaseReleaseParams.NameFirstWaiter); LeaseReleaseFirstAutocommit replaces
	// it as LeaseReleaseAutocommit replaces LeaseRelease.
	LeaseReleaseFirst           string
	LeaseReleaseFirstAutocommit string
	// LeaseReleaseSettles, when true, makes every LeaseRelease statement
	// take $4, sqlstore.LeaseReleaseParams.Settled; without it the
	// statements take three arguments and the store records every
	// request when it grants it.
	LeaseReleaseSettles bool
	// RequestInRow says the store's grants leave a generation's request
	// recorded in its lease row alone until the row is overwritten
	// (steps.RowRecords).
	RequestInRow  bool
	RequestInsert string // $1 resource, $2 request id, $3 fence
	RequestFence  string // $1 resource, $2 request id → fence
	WaiterPrune   string // $1 resource: delete its expired waiters; empty if WaiterInsert does
	WaiterInsert  string // $1 resource, $2 holder, $3 ttl µs, $4 request id or NULL, $5 term µs → seq; touched_at the clock
	WaiterTouch   string // $1 resource, $2 seq, $3 ttl µs; touched_at the clock
	WaiterFirst   string // $1 resource, $2 seq → the lowest live seq (seq counts as live)
	// WaiterTouchFirst, when set, is WaiterTouch and WaiterFirst in one
	// statement: $1 resource, $2 seq, $3 ttl µs → the lowest live seq, no
	// row when seq is not queued.
	WaiterTouchFirst string
	WaiterDelete     string // $1 seq
	RequestPrune     string // $1 age µs, $2 limit: delete request rows made before now - age
	WaiterPruneAll   string // $1 limit: delete expired waiter rows
	RejectionPrune   string // $1 keep, $2 limit: delete rejection rows but the newest keep
	WaiterList       string // $1 resource → seq, resource, holder, expires µs, request id or '', term µs or 0, touched µs or 0
	// SemaphoreGet and SemaphoreSet read and store a semaphore's permits
	// (sqlstore.Executor.SemaphorePermits, SetSemaphorePermits): $1 name → permits; $1 name, $2 permits.
	SemaphoreGet string
	SemaphoreSet string
	// PathLockShared and PathLockExclusive take a path's lock
	// (sqlstore.Executor.PathLock): $1 resource. Empty where a write
	// transaction holds the whole database (SQLite).
	PathLockShared    string
	PathLockExclusive string
	// LeaseLiveBelow reads the first live lease strictly below a directory:
	// $1 the directory (ending in "/"), $2 the same with its "/" made "0",
	// the first name above every name under it → the lease columns and
	// clock.
	LeaseLiveBelow string
	// FloorGetLocked is FloorGet as a locking read; empty where FloorGet
	// reads the newest committed row already (Postgres and SQLite here).
	FloorGetLocked string
	// ClockTick, when set, runs before every statement that judges or
	// stamps a lease (LeaseGetForUpdate, LeaseGrant, LeaseRenew,
	// LeaseRelease): SQLite's clock high-water mark, raised to the wall
	// clock, which those statements then read as "now".
	ClockTick string
	// LeaseAcquire, when set, is a whole acquisition in one statement
	// (sqlstore.Executor.LeaseAcquire; without it, the shared steps): $1 resource, $2 holder, $3 request id,
	// $4 ttl µs, $5 lock timeout text → status, the lease columns and
	// clock, fence, floor, floor holder.
	LeaseAcquire string
	// LeaseAcquireAutocommit, when set, is tried before LeaseAcquire in an
	// executor outside any caller's transaction (Autocommit): the same
	// arguments and columns, faster where the lease row exists and is
	// free. Where it would have to undo what it wrote it fails with
	// SQLSTATE AcquireRecheck or 23505 (unique_violation), its whole
	// transaction rolled back, and LeaseAcquire answers instead.
	LeaseAcquireAutocommit string
	// LeaseAcquireTurn, required with LeaseAcquire, is LeaseAcquire for a
	// waiter whose turn came (sqlstore.LeaseAcquireParams.Waiter): $1..$5
	// as LeaseAcquire, $6 the waiter's seq, which a grant deletes in its
	// own transaction, and $7 true to take LeaseAcquireAutocommit's fast path (only in
	// Autocommit's copy; it fails as LeaseAcquireAutocommit does) or false
	// for LeaseAcquire's. Same columns.
	LeaseAcquireTurn string
	// RefusalLog, when set, is the refusal log's rule in one statement
	// (Postgres: fencegate_refusal_record, the SQL protocol's
	// fencegate_log_refusal): $1 resource, $2 holder, $3 fence → seq,
	// floor, floor holder, not issued, at µs; no row when the database
	// finds the fence not refused (nothing recorded).
	RefusalLog string

	// leaseAcquireFirst is LeaseAcquireAutocommit in Autocommit's copy,
	// empty in a transaction's, which such a failure would abort.
	leaseAcquireFirst string
}

// AcquireRecheck is the SQLSTATE with which Queries.LeaseAcquireAutocommit
// asks for Queries.LeaseAcquire, having written nothing.
const AcquireRecheck = "FG004"

// Autocommit returns the statements for an executor that runs each on its
// own (Store.Executor): q with its autocommit variants in place.
func (q *Queries) Autocommit() *Queries {
	if q.LeaseReleaseAutocommit == "" && q.LeaseAcquireAutocommit == "" {
		return q
	}
	c := *q
	c.LeaseRelease = cmp.Or(q.LeaseReleaseAutocommit, q.LeaseRelease)
	c.LeaseReleaseFirst = cmp.Or(q.LeaseReleaseFirstAutocommit, q.LeaseReleaseFirst)
	c.leaseAcquireFirst = q.LeaseAcquireAutocommit
	return &c
}
