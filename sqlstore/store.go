package sqlstore

import (
	"context"
	"time"
)

// Dialect names the SQL dialect a driver speaks. Each driver package
// declares its own (pgxv5.Dialect and pgsql.Dialect are "postgres",
// sqlite.Dialect is "sqlite"), so a new dialect adds no constant here.
type Dialect string

// Driver is what the gate needs from a database: its own transactions, in
// the caller's native transaction type TTx (pgx.Tx or *sql.Tx), and the
// fencegate statements run inside them.
//
// pgxv5.Driver implements Driver[pgx.Tx]; pgsql.Driver and sqlite.Driver
// implement Driver[*sql.Tx].
type Driver[TTx any] interface {
	Store

	// Begin starts a read-write transaction; on SQLite it takes the write
	// lock at once (BEGIN IMMEDIATE).
	Begin(ctx context.Context) (TTx, error)
	// Commit commits tx.
	Commit(ctx context.Context, tx TTx) error
	// Rollback rolls tx back. Rolling back a finished transaction is not an
	// error.
	Rollback(ctx context.Context, tx TTx) error
	// UnwrapExecutor runs fencegate statements inside the caller's tx.
	UnwrapExecutor(tx TTx) Executor
}

// Store is the transaction-type-free part of a Driver, which is all the lease
// coordinator needs.
type Store interface {
	// Dialect reports the SQL dialect.
	Dialect() Dialect
	// Executor runs each statement on its own, outside any caller's
	// transaction (autocommit).
	Executor() Executor
	// InTx runs fn in a new read-write transaction and commits it if fn
	// returns nil; otherwise it rolls back and returns fn's error.
	InTx(ctx context.Context, fn func(Executor) error) error
	// Migrate applies every pending fencegate migration.
	Migrate(ctx context.Context) error

	// ClockPrecision is the tick of the database clock that stamps grants
	// and expiries: the lease coordinator shaves it off every TTL it
	// reports, since a grant can be recorded up to a tick before the request
	// was processed. One microsecond on Postgres, one millisecond on SQLite.
	ClockPrecision() time.Duration
	// ClassifyError marks a native error of this driver's database (one the
	// caller's own statements returned, say) so that IsRetryable and
	// IsConnLost answer for it; see WithClass. Errors the driver itself
	// returns are marked already. nil stays nil.
	ClassifyError(err error) error
}

// DurabilityReporter is implemented by drivers whose database can run with
// settings that lose commits it acknowledged (pgxv5, pgsql and sqlite do).
// DurabilityWarnings says, one sentence each, what it found: on Postgres,
// synchronous_commit off, and standbys that replicate asynchronously (a
// failover to one can reissue fences: see lease.Coordinator.AdvanceFences);
// on SQLite, synchronous=NORMAL. None is nil.
type DurabilityReporter interface {
	DurabilityWarnings(ctx context.Context) ([]string, error)
}

// Executor runs fencegate's statements. Implementations hold SQL text for
// their dialect; callers hold the policy. Every argument is bound.
type Executor interface {
	// FloorRaise creates the resource's floor at fence, or raises it to
	// max(floor, fence), and reports the floor after the statement. The row
	// stays locked until the transaction ends. With verifyIssued, the floor is
	// touched only when the lease table holds exactly (resource, holder,
	// fence); otherwise Issued is false and nothing is written.
	FloorRaise(ctx context.Context, p FloorRaiseParams) (FloorRaiseResult, error)
	// FloorGet reads a floor; ErrNotFound if the resource has none.
	FloorGet(ctx context.Context, resource string) (Floor, error)
	// FloorList reads every floor, ordered by resource.
	FloorList(ctx context.Context) ([]Floor, error)

	// RejectionInsert appends to the rejection log and returns the record
	// with its sequence number and time filled in.
	RejectionInsert(ctx context.Context, r Rejection) (Rejection, error)
	// RejectionList reads the log in sequence order, after AfterSeq, at most
	// Limit records, for one resource when Resource is set.
	RejectionList(ctx context.Context, p RejectionListParams) ([]Rejection, error)

	// SetLockTimeout bounds how long the current transaction waits for a row
	// lock (Postgres SET LOCAL lock_timeout; a no-op on SQLite, whose
	// transaction already holds the write lock).
	SetLockTimeout(ctx context.Context, d time.Duration) error
	// FenceNext takes the next fence from the sequence.
	FenceNext(ctx context.Context) (int64, error)
	// FenceAtLeast makes every later FenceNext return at least min. It must
	// run in its own transaction; on Postgres it blocks concurrent FenceNext
	// callers until that transaction ends.
	FenceAtLeast(ctx context.Context, min int64) error

	// LeaseGetForUpdate reads a resource's lease row and locks it until the
	// transaction ends. Now is the database's clock at the read. Found is
	// false when the resource has never been leased.
	LeaseGetForUpdate(ctx context.Context, resource string) (LeaseRow, error)
	// LeaseGet reads a resource's lease row without locking it; ErrNotFound
	// if the resource was never leased.
	LeaseGet(ctx context.Context, resource string) (LeaseRow, error)
	// LeaseList reads every lease row, ordered by resource.
	LeaseList(ctx context.Context) ([]LeaseRow, error)
	// LeaseGrant writes a new generation: inserts the row, or replaces the
	// locked one, with expiry ttl after the database's clock. Inserted is
	// false (and nothing is written) when a concurrent transaction created
	// the row first; the caller should read it again. A grant also records
	// RequestID as having made a generation (see RequestFence).
	LeaseGrant(ctx context.Context, p LeaseGrantParams) (LeaseRow, bool, error)
	// RequestFence returns the fence of the generation that the acquisition
	// request requestID made on resource, or 0 if it never made one.
	RequestFence(ctx context.Context, resource, requestID string) (int64, error)
	// LeaseRenew extends the live lease (resource, holder, fence) to ttl after
	// the database's clock, never shortening it: the new expiry is the later
	// of that and the current one (a holder may have been given the current
	// one as its deadline). Found is false, and nothing is written, when that
	// lease is released, expired, or superseded.
	LeaseRenew(ctx context.Context, p LeaseRenewParams) (LeaseRow, error)
	// LeaseRelease marks the live lease (resource, holder, fence) released and
	// reports whether it did; any other lease is left alone.
	LeaseRelease(ctx context.Context, resource, holder string, fence int64) (bool, error)

	// PathLock takes the lock of a path resource (gate.PathResource) until
	// the transaction ends, creating its row in fencegate_path_lock if
	// missing: exclusive for a claim of the path itself or an Admit of its
	// fence, shared for a claim or a write below it (the path is one of
	// their directories). Exclusive on Postgres also writes the row, so a
	// REPEATABLE READ transaction that locks it later fails to serialize
	// rather than read floors older than the grant. A no-op on SQLite,
	// whose write transaction holds the whole database. Callers lock paths
	// in sorted order (gate.Ancestors are sorted first), before any lease or
	// floor row, so two lockers never wait on each other in a cycle.
	PathLock(ctx context.Context, resource string, exclusive bool) error
	// LeaseLiveBelow reads the first live lease (by name) of a resource
	// strictly below the directory resource dir (its name starts with dir),
	// without locking it; Found is false when there is none. The caller
	// holds dir's PathLock exclusively, so none can be granted meanwhile.
	LeaseLiveBelow(ctx context.Context, dir string) (LeaseRow, error)
	// FloorGetLocked reads a floor, as FloorGet does, with a locking read
	// (the newest committed row, at any isolation level); ErrNotFound if
	// the resource has none. The write side of the path rule reads a
	// directory's floor so, under the directory's shared PathLock.
	FloorGetLocked(ctx context.Context, resource string) (Floor, error)

	// WaiterAdd puts a waiter for resource at the back of its queue, live
	// until ttl after the database's clock, and returns its place: a number
	// above every place handed out before, on any resource. It also deletes
	// the resource's waiters whose time ran out.
	WaiterAdd(ctx context.Context, resource, holder string, ttl time.Duration) (int64, error)
	// WaiterTouch keeps the waiter at place seq live until ttl after the
	// database's clock and returns the place of the first live waiter of
	// resource (seq itself counts as live). Kept is false, and nothing is
	// written, when seq is no longer queued (removed, or deleted after its
	// time ran out).
	WaiterTouch(ctx context.Context, resource string, seq int64, ttl time.Duration) (first int64, kept bool, err error)
	// WaiterRemove takes the waiter at place seq out of the queue; removing
	// one that is gone is not an error.
	WaiterRemove(ctx context.Context, seq int64) error
	// WaiterList reads the live waiters of resource, first place first.
	WaiterList(ctx context.Context, resource string) ([]Waiter, error)
}

// Waiter is one row of fencegate_waiter: an acquisition waiting its turn.
type Waiter struct {
	Seq       int64 // its place: lower is earlier
	Resource  string
	Holder    string
	ExpiresAt time.Time // it leaves the queue then unless touched again
}

// Notifier is implemented by a Store whose database can announce lease
// changes to other connections, so that a waiting acquisition is woken at
// once rather than by a timer (Postgres: LISTEN/NOTIFY; pgxv5.Driver and
// pgsql.Driver implement it). It is optional: without it, waiters are woken
// by their own process and by timers.
//
// A lease change is a release, or the first waiter leaving a resource's
// queue while the lease is not live (with migration 00005's triggers alone,
// also a grant and any waiter leaving). Announcements may be lost (a cut
// connection) or spurious (with migration 00005's triggers alone, another
// schema's change of a resource of the same name), so a listener treats one
// as a hint to look again, and acts on a First only after touching its place
// recently enough to know it still stands.
type Notifier interface {
	// ListenLeases holds one connection to listen on until ctx ends or the
	// connection fails, and returns why it stopped (never nil). It calls
	// ready once it listens, then changed with each lease change committed
	// after that, from one goroutine, in commit order.
	ListenLeases(ctx context.Context, ready func(), changed func(LeaseChange)) error
}

// LeaseChange is one announcement of a Notifier. The zero value announces
// nothing.
type LeaseChange struct {
	Resource string
	// First is the place (Waiter.Seq) of the resource's first live waiter
	// in the listener's own schema as the change committed: the one waiter
	// the change concerns (another schema's announcements are not passed
	// on). It is 0 when no waiter was queued, or when the database's
	// triggers predate naming it; then any waiter may look.
	First int64
}

// FloorRaiseParams are the inputs of Executor.FloorRaise.
type FloorRaiseParams struct {
	Resource     string
	Holder       string
	Fence        int64
	VerifyIssued bool
}

// FloorRaiseResult is the outcome of Executor.FloorRaise.
type FloorRaiseResult struct {
	Issued      bool   // false only under VerifyIssued: no such lease, nothing written
	Admitted    bool   // the fence is now the floor (it was above or equal to it)
	Floor       int64  // the floor after the statement
	FloorHolder string // the holder that raised the floor to Floor
}

// Floor is one row of fencegate_floor.
type Floor struct {
	Resource  string
	Floor     int64
	Holder    string
	UpdatedAt time.Time
}

// Rejection is one row of fencegate_rejection: a refused token.
type Rejection struct {
	Seq         int64
	Resource    string
	Fence       int64
	Holder      string
	Floor       int64
	FloorHolder string
	NotIssued   bool
	At          time.Time
}

// RejectionListParams select records for Executor.RejectionList.
type RejectionListParams struct {
	Resource string // all resources when empty
	AfterSeq int64
	Limit    int  // at most this many; 100 when zero
	Newest   bool // newest first instead of oldest first
}

// LeaseRow is one row of fencegate_lease: a resource's current generation.
type LeaseRow struct {
	Found     bool
	Resource  string
	Holder    string
	Fence     int64
	RequestID string
	GrantedAt time.Time
	ExpiresAt time.Time
	Released  bool
	// Now is the database's clock when the row was read or written.
	Now time.Time
}

// Live reports whether the row is an unexpired, unreleased lease at Now.
func (r LeaseRow) Live() bool { return r.Found && !r.Released && r.ExpiresAt.After(r.Now) }

// LeaseGrantParams are the inputs of Executor.LeaseGrant.
type LeaseGrantParams struct {
	Resource  string
	Holder    string
	Fence     int64
	RequestID string
	TTL       time.Duration
	// Replace is true when LeaseGetForUpdate found (and locked) a row.
	Replace bool
}

// LeaseRenewParams are the inputs of Executor.LeaseRenew.
type LeaseRenewParams struct {
	Resource string
	Holder   string
	Fence    int64
	TTL      time.Duration
}

// LeaseAcquirer is a capability an Executor may have: a whole lease
// acquisition in one statement, so in one round trip. The lease coordinator
// uses it when Store.Executor's value has it, and otherwise runs the same
// steps one statement at a time in a transaction of its own (InTx).
//
// LeaseAcquire must keep exactly the coordinator's rules, in the
// statement's own transaction: bound every row-lock wait by LockTimeout
// (failing with a retryable error), lock the resource's lease row, answer a
// live lease this request made with AcquireRetried, a request that already
// made a generation with AcquireRequestExpired, someone's live lease with
// AcquireHeld, and otherwise take the next fence and, unless the floor is
// above it (AcquireFloorAhead, nothing written), write the new generation,
// record RequestID (see Executor.RequestFence) and raise the floor to the
// fence (Executor.FloorRaise), all committed together; with a Waiter, a
// grant (or a retry's answer) also takes the waiter's place out of the queue
// in that transaction (LeaseAcquireParams.Waiter).
type LeaseAcquirer interface {
	LeaseAcquire(ctx context.Context, p LeaseAcquireParams) (LeaseAcquireResult, error)
}

// FirstWaiterReleaser is a capability an Executor may have: a release that
// also reads, in the same statement, the place of the resource's first live
// waiter, the waiter the release hands the lease to (both Postgres drivers;
// the other drivers' executors have it too, and answer 0).
// The lease coordinator uses it to send a waiter of its own straight to its
// acquisition, as an announcement naming it would (Notifier).
type FirstWaiterReleaser interface {
	// LeaseReleaseFirst is Executor.LeaseRelease, and also returns the
	// place (Waiter.Seq) of the first live waiter of resource as the
	// release ran: 0 when nothing was released, when no waiter was queued,
	// or when the executor cannot tell (then any waiter may look).
	LeaseReleaseFirst(ctx context.Context, resource, holder string, fence int64) (released bool, first int64, err error)
}

// LeaseBatchRenewer is a capability an Executor may have: many renewals in
// one statement, so in one round trip (both Postgres drivers). The lease
// coordinator's batch renewal uses it when Store.Executor's value has it,
// and otherwise renews one lease after another in a transaction of its own
// (InTx).
//
// LeaseRenewBatch keeps LeaseRenew's rules for each lease, reading the
// database's clock once for the whole statement: it returns one row per
// request, in order, the renewed lease with Found true, or Found false (and
// nothing written for it) for a lease that is released, expired or
// superseded. A request repeated in the batch is renewed once; its copies
// answer Found false.
type LeaseBatchRenewer interface {
	LeaseRenewBatch(ctx context.Context, ps []LeaseRenewParams) ([]LeaseRow, error)
}

// ConnPinner is implemented by a Store that can take a connection from its
// pool before any statement is written (pgxv5.Driver and the database/sql
// drivers over sqlexec). OnConn waits for the connection, then runs fn with
// an Executor whose statements run on it, each on its own (autocommit), and
// gives the connection back. The lease coordinator uses it to read the
// holder's clock for a request once the connection is in hand, so that
// time queued for the pool is not taken off the lease. A driver that keeps
// its statements prepared per pool (SQLite) may run fn on Executor instead.
//
// MaxConns is the most connections the pool opens, 0 for no limit: the
// coordinator keeps one of them free of its own acquisitions and releases,
// so that renewals are not queued behind them.
type ConnPinner interface {
	OnConn(ctx context.Context, fn func(Executor) error) error
	MaxConns() int
}

// LeaseAcquireParams are the inputs of LeaseAcquirer.LeaseAcquire.
type LeaseAcquireParams struct {
	Resource    string
	Holder      string
	RequestID   string
	TTL         time.Duration
	LockTimeout time.Duration
	// Waiter, when not 0, is the place (Waiter.Seq) of the acquisition's
	// own waiter (an acquisition whose turn came in the queue): an answer
	// of AcquireGranted or AcquireRetried also takes that place out of the
	// queue, in the same transaction, so that the queue never shows the
	// new holder ahead of the next waiter. Any other answer leaves it.
	Waiter int64
}

// AcquireStatus is the kind of answer LeaseAcquirer.LeaseAcquire gives.
type AcquireStatus int

// The answers of LeaseAcquirer.LeaseAcquire.
const (
	// AcquireGranted: a new generation, LeaseAcquireResult.Lease.
	AcquireGranted AcquireStatus = iota + 1
	// AcquireRetried: Lease is the live lease this very request made.
	AcquireRetried
	// AcquireHeld: Lease is a live lease under another request, which
	// blocks the grant.
	AcquireHeld
	// AcquireRequestExpired: the request made the generation with fence
	// Fence, which is over; nothing was written.
	AcquireRequestExpired
	// AcquireFloorAhead: the floor (Floor, raised by FloorHolder) is above
	// the new fence Fence; nothing was written.
	AcquireFloorAhead
)

// LeaseAcquireResult is the outcome of LeaseAcquirer.LeaseAcquire.
type LeaseAcquireResult struct {
	Status AcquireStatus
	// Lease is the granted, retried or blocking lease row, with Now the
	// database's clock after any wait for its lock.
	Lease       LeaseRow
	Fence       int64  // AcquireRequestExpired: the request's fence; AcquireFloorAhead: the new fence
	Floor       int64  // AcquireFloorAhead only
	FloorHolder string // AcquireFloorAhead only
}
