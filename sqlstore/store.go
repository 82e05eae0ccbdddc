package sqlstore

import (
	"context"
	"errors"
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
	// error. It waits for the database at most until ctx ends, but when it
	// returns, even with an error, tx can no longer commit: the gate's
	// refusals rely on it.
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

	// The capabilities a database may lack are said by these methods,
	// never by optional interfaces: every Store has all of them, and a
	// driver without the capability answers as it documents.

	// SupportsListener reports whether ListenLeases announces lease
	// changes (Postgres: LISTEN/NOTIFY). Without it, waiters are woken by
	// their own process and by timers.
	SupportsListener() bool
	// ListenLeases holds one connection to listen on until ctx ends or the
	// connection fails, and returns why it stopped (never nil). It calls
	// ready once it listens, then changed with each lease change committed
	// after that, from one goroutine, in commit order. A store whose
	// SupportsListener is false returns ErrNotSupported at once, without
	// calling ready.
	//
	// A lease change is a release, or the first waiter leaving a
	// resource's queue while the lease is not live. Announcements may be
	// lost (a cut connection) or spurious, so a listener treats one as a hint to look again, and acts on
	// a First only after touching its place recently enough to know it
	// still stands.
	ListenLeases(ctx context.Context, ready func(), changed func(LeaseChange)) error
	// WatchLeases is ListenLeases for a listener that has no place in the
	// waiter queue of the resources it cares about (an election's observer,
	// a semaphore's head of line watching its permits). On Postgres a
	// release is announced only when its resource has a
	// live waiter or a watcher; WatchLeases registers w for the listening
	// session before it calls ready, and in such a way that a release
	// committed after ready is announced to it, and one in flight as it
	// registers has committed by the time ready is called (package
	// lease's doc, "Waiting", has the proof). The registration ends with the
	// session. Without SupportsListener: ErrNotSupported, as ListenLeases.
	WatchLeases(ctx context.Context, w Watch, ready func(), changed func(LeaseChange)) error
	// DurabilityWarnings says, one sentence each, which settings of the
	// database can lose commits it acknowledged: on Postgres,
	// synchronous_commit off, and standbys that replicate asynchronously
	// (a failover to one can reissue fences: see
	// lease.Coordinator.AdvanceFences); on SQLite, synchronous=NORMAL.
	// None is nil; a driver that checks nothing (MySQL) always answers nil.
	DurabilityWarnings(ctx context.Context) ([]string, error)
	// OnConn waits for a connection from the store's pool, then runs fn
	// with an Executor whose statements run on it, each on its own
	// (autocommit), and gives the connection back. The lease coordinator
	// uses it to read the holder's clock for a request once the connection
	// is in hand, so that time queued for the pool is not taken off the
	// lease. A store that cannot take a connection first (MySQL), or that
	// keeps its statements prepared per pool (SQLite), runs fn on Executor.
	OnConn(ctx context.Context, fn func(Executor) error) error
	// MaxConns is the most connections the store's pool opens, 0 for no
	// limit or unknown: the coordinator keeps one of them free of its own
	// acquisitions and releases, so that renewals are not queued behind
	// them.
	MaxConns() int
}

// ErrNotSupported is returned by a Store method whose capability the
// database lacks (ListenLeases where SupportsListener is false).
var ErrNotSupported = errors.New("sqlstore: not supported by this driver")

// DurabilityReporter names Store.DurabilityWarnings for a caller that holds
// less than a Store. Every Store implements it.
type DurabilityReporter interface {
	DurabilityWarnings(ctx context.Context) ([]string, error)
}

// Executor runs fencegate's statements. Implementations hold SQL text for
// their dialect; callers hold the policy. Every argument is bound. A method
// with more inputs than a key or two takes them as (ctx, *XParams), as
// river's driver does, so that an input can be added without breaking
// callers; executors never modify the params.
type Executor interface {
	// FloorRaise creates the resource's floor at fence, or raises it to
	// max(floor, fence), and reports the floor after the statement. The row
	// stays locked until the transaction ends. With verifyIssued, the floor is
	// touched only when the lease table holds exactly (resource, holder,
	// fence); otherwise Issued is false and nothing is written.
	FloorRaise(ctx context.Context, p *FloorRaiseParams) (FloorRaiseResult, error)
	// FloorGet reads a floor; ErrNotFound if the resource has none.
	FloorGet(ctx context.Context, resource string) (Floor, error)
	// FloorList reads every floor, ordered by resource.
	FloorList(ctx context.Context) ([]Floor, error)

	// RejectionInsert appends to the rejection log and returns the record
	// with its sequence number and time filled in.
	RejectionInsert(ctx context.Context, r Rejection) (Rejection, error)
	// RejectionList reads the log in sequence order, after AfterSeq, at most
	// Limit records, for one resource when Resource is set.
	RejectionList(ctx context.Context, p *RejectionListParams) ([]Rejection, error)

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

	// The lease rules. Each is required and stated once per dialect: in
	// SQL on Postgres, and in the step-by-step implementation that the
	// SQLite and MySQL drivers share. On Store.Executor (and OnConn's) each
	// runs in a transaction of its own; on a transaction's executor
	// (Driver.UnwrapExecutor, InTx) it runs in that transaction, whose
	// caller must roll it back on an error.

	// LeaseAcquire is a whole acquisition: bound every row-lock wait by
	// LockTimeout (failing with a retryable error), lock the resource's
	// lease row, answer a live lease this request made with
	// AcquireRetried, a request that already made a generation with
	// AcquireRequestExpired, someone's live lease with AcquireHeld, and
	// otherwise take the next fence and, unless the floor is above it
	// (AcquireFloorAhead, nothing written), write the new generation,
	// record RequestID (see RequestFence) and raise the floor to the fence
	// (FloorRaise), all committed together. With a Waiter, a grant (or a
	// retry's answer) also takes the waiter's place out of the queue in
	// that transaction. On Postgres it is one statement, so one round
	// trip.
	LeaseAcquire(ctx context.Context, p *LeaseAcquireParams) (LeaseAcquireResult, error)
	// LeaseRenew extends the live lease (Resource, Holder, Fence) to TTL
	// after the database's clock, never shortening it: the new expiry is
	// the later of that and the current one (a holder may have been given
	// the current one as its deadline). Found is false, and nothing is
	// written, when that lease is released, expired, or superseded.
	LeaseRenew(ctx context.Context, p *LeaseRenewParams) (LeaseRow, error)
	// LeaseRenewBatch is LeaseRenew for each of p.Renewals, all in one
	// transaction (on Postgres one statement, which reads the database's
	// clock once): it returns one row per renewal, in order, the renewed
	// lease with Found true, or Found false (and nothing written for it)
	// for a lease that is released, expired or superseded. A lease named
	// twice is renewed once: one copy answers it, the others Found false.
	LeaseRenewBatch(ctx context.Context, p *LeaseRenewBatchParams) ([]LeaseRow, error)
	// LeaseRelease marks the live lease (Resource, Holder, Fence) released
	// and reports whether it did; any other lease is left alone. With
	// NameFirstWaiter it also reads, in the same transaction, the place of
	// the resource's first live waiter: the waiter the release hands the
	// lease to.
	LeaseRelease(ctx context.Context, p *LeaseReleaseParams) (LeaseReleaseResult, error)
	// LeaseAbandon spends an acquisition request whose outcome its sender
	// never learned (its context ended, or the reply was lost), in one
	// transaction: each member's lease row locked in order (Members, or
	// Resource alone), the live lease the request made released, and,
	// where the request made no generation, the request recorded as spent
	// (RequestRecord, under a fence of its own; on a resource never leased
	// with a lease row over at once, so that a first grant of the request
	// still in flight conflicts with it). A sending of the request that the
	// database runs after the abandon commits, however late, is then
	// answered AcquireRequestExpired and grants nothing: without it, a
	// sending queued at the server behind the sender's cancellation could
	// be granted after the sender gave up, and hold the resource for a
	// whole term.
	LeaseAbandon(ctx context.Context, p *LeaseAbandonParams) (LeaseAbandonResult, error)

	// The steps of LeaseAcquire, which the shared step-by-step
	// implementation runs one statement at a time; a caller outside the
	// drivers uses LeaseAcquire.

	// LeaseGetForUpdate reads a resource's lease row and locks it until the
	// transaction ends. Now is the database's clock at the read. Found is
	// false when the resource has never been leased.
	LeaseGetForUpdate(ctx context.Context, resource string) (LeaseRow, error)
	// LeaseGrant writes a new generation: inserts the row, or replaces the
	// locked one, with expiry ttl after the database's clock. Inserted is
	// false (and nothing is written) when a concurrent transaction created
	// the row first; the caller should read it again. A grant also records
	// RequestID as having made a generation (see RequestFence).
	LeaseGrant(ctx context.Context, p *LeaseGrantParams) (LeaseRow, bool, error)
	// RequestFence returns the fence of the generation that the acquisition
	// request requestID made on resource, or 0 if it never made one.
	RequestFence(ctx context.Context, resource, requestID string) (int64, error)
	// RequestRecord records requestID as having made the generation with
	// fence on resource (what LeaseGrant records), without a lease:
	// LeaseAbandon's mark of a spent request.
	RequestRecord(ctx context.Context, resource, requestID string, fence int64) error
	// WaiterRemove takes the waiter at place seq out of the queue; removing
	// one that is gone is not an error.
	WaiterRemove(ctx context.Context, seq int64) error

	// LeaseGet reads a resource's lease row without locking it; ErrNotFound
	// if the resource was never leased.
	LeaseGet(ctx context.Context, resource string) (LeaseRow, error)
	// LeaseList reads every lease row, ordered by resource.
	LeaseList(ctx context.Context) ([]LeaseRow, error)

	// PathLock takes the lock of a path resource (fence.PathResource) until
	// the transaction ends, creating its row in fencegate_path_lock if
	// missing: exclusive for a claim of the path itself or an Admit of its
	// fence, shared for a claim or a write below it (the path is one of
	// their directories). Exclusive on Postgres also writes the row, so a
	// REPEATABLE READ transaction that locks it later fails to serialize
	// rather than read floors older than the grant. A no-op on SQLite,
	// whose write transaction holds the whole database. Callers lock paths
	// in sorted order (fence.Ancestors are sorted first), before any lease or
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

	// WaiterAdd puts a waiter for p.Resource at the back of its queue, live
	// until p.TTL after the database's clock (which it records as the
	// place's last touch), and returns its place: a number above every
	// place handed out before, on any resource. It also deletes the
	// resource's waiters whose time ran out. With p.RequestID the waiter
	// accepts a hand-over (LeaseHandOver).
	WaiterAdd(ctx context.Context, p *WaiterAddParams) (int64, error)
	// WaiterTouch keeps the waiter at place seq live until ttl after the
	// database's clock, records that clock as the place's last touch, and
	// returns the place of the first live waiter of resource (seq itself
	// counts as live). Kept is false, and nothing is written, when seq is
	// no longer queued (removed, granted by a hand-over, or deleted after
	// its time ran out).
	WaiterTouch(ctx context.Context, resource string, seq int64, ttl time.Duration) (first int64, kept bool, err error)
	// WaiterList reads the live waiters of resource, first place first.
	WaiterList(ctx context.Context, resource string) ([]Waiter, error)
	// WaiterHead reads the first live waiter of resource and locks its row
	// until the transaction ends (a no-op lock on SQLite, whose write
	// transaction holds the database), so that its last touch cannot move
	// meanwhile; found is false when none waits. A step of LeaseHandOver.
	WaiterHead(ctx context.Context, resource string) (w Waiter, found bool, err error)

	// LeaseHandOver is a holder's release that hands the resource straight
	// to its first live waiter, in the caller's transaction, so that the
	// holder's last fenced write, the release and the next grant commit
	// together: lock the lease row; unless (Resource, Holder, Fence) is
	// the live lease, answer Released false and write nothing; otherwise
	// read the first live waiter (WaiterHead) and, when it accepts a
	// hand-over (Waiter.RequestID), write a new generation for it under the
	// next fence (the floor raised to it, its request recorded, its place
	// taken out of the queue), dated from the waiter's last touch
	// (GrantedAt) and ending at the earlier of that touch plus the term it
	// asked for and its place's own expiry (a first term no longer than
	// the WaiterTTL: a waiter that died after its last touch holds the
	// resource no longer than its place would have blocked the queue); on
	// Postgres the commit announces the grant, naming the waiter
	// (LeaseChange.Granted). Without such a waiter, or when the new fence
	// is below the floor, or the first term would already be over, the
	// lease is released as LeaseRelease releases it.
	LeaseHandOver(ctx context.Context, p *LeaseHandOverParams) (LeaseHandOverResult, error)

	// SemaphorePermits returns the number of permits stored for the
	// semaphore name (semaphore.Semaphore, table fencegate_semaphore), and false
	// when none is stored.
	SemaphorePermits(ctx context.Context, name string) (permits int, found bool, err error)
	// SetSemaphorePermits stores permits for the semaphore name, replacing
	// what was stored, so that every participant grants by the same N. The
	// caller validates permits (the table checks 1..1024).
	SetSemaphorePermits(ctx context.Context, name string, permits int) error

	// Prune deletes rows that can no longer matter, at most p.Limit of each
	// table per call (a batch: call again while a count equals Limit):
	// request rows made more than p.RequestAge ago (on the database's
	// clock), expired waiter rows, and, when p.RejectionKeep > 0, rejection
	// rows older than the newest RejectionKeep. It never touches floors or
	// leases. lease.Coordinator.Prune holds the policy (why a request older
	// than the longest term can go).
	Prune(ctx context.Context, p *PruneParams) (PruneResult, error)
}

// PruneParams are the inputs of Executor.Prune.
type PruneParams struct {
	// RequestAge: request rows made longer ago than this go; 0 keeps them
	// all.
	RequestAge time.Duration
	// Waiters: expired waiter rows go.
	Waiters bool
	// RejectionKeep: all but the newest RejectionKeep rejection rows go; 0
	// keeps them all.
	RejectionKeep int64
	// Limit is the most rows deleted from each table (0: 1000).
	Limit int
}

// PruneResult counts the rows Executor.Prune deleted, by table.
type PruneResult struct {
	Requests, Waiters, Rejections int64
}

// Waiter is one row of fencegate_waiter: an acquisition waiting its turn.
type Waiter struct {
	Seq       int64 // its place: lower is earlier
	Resource  string
	Holder    string
	ExpiresAt time.Time // it leaves the queue then unless touched again
	// RequestID is the acquisition request a hand-over grants the waiter
	// (LeaseHandOver); empty for a waiter that takes no hand-over.
	RequestID string
	// Term is the lease term the waiter asked for, which a hand-over
	// grants from TouchedAt (capped at ExpiresAt); 0 with no RequestID.
	Term time.Duration
	// TouchedAt is the database's clock at the place's last touch (or its
	// WaiterAdd); zero for a row older than the hand-over migration.
	TouchedAt time.Time
}

// WaiterAddParams are the inputs of Executor.WaiterAdd.
type WaiterAddParams struct {
	Resource string
	Holder   string
	TTL      time.Duration // the place's life without a touch (WaiterTTL)
	// RequestID, when set, makes the waiter accept a hand-over: the
	// request a hand-over's grant records and answers.
	RequestID string
	// Term is the lease term a hand-over grants, from the place's last
	// touch; required with RequestID.
	Term time.Duration
}

// LeaseHandOverParams are the inputs of Executor.LeaseHandOver: the lease
// released.
type LeaseHandOverParams struct {
	Resource string
	Holder   string
	Fence    int64
}

// LeaseHandOverResult is the outcome of Executor.LeaseHandOver.
type LeaseHandOverResult struct {
	// Released is true when (Resource, Holder, Fence) was the live lease,
	// now released or handed over.
	Released bool
	// Waiter is the place of the waiter handed the resource, 0 for none.
	Waiter int64
	// Lease is the new generation when Waiter is not 0: its GrantedAt is
	// the waiter's last touch, from which its term is dated.
	Lease LeaseRow
}

// Watch names the resources a WatchLeases listener watches: Resource
// itself, or with Prefix every resource whose name begins with Resource.
// The zero value watches nothing, and WatchLeases is then ListenLeases.
type Watch struct {
	Resource string
	Prefix   bool
}

// LeaseChange is one announcement of Store.ListenLeases. The zero value announces
// nothing.
type LeaseChange struct {
	Resource string
	// First is the place (Waiter.Seq) of the resource's first live waiter
	// in the listener's own schema as the change committed: the one waiter
	// the change concerns (another schema's announcements are not passed
	// on). It is 0 when no waiter was queued, or when the database's
	// triggers predate naming it; then any waiter may look.
	First int64
	// Granted is true when the change is a hand-over that granted the
	// resource to the waiter at place First (Executor.LeaseHandOver): it
	// need not acquire, only read its lease.
	Granted bool
	// Lease, when Found, is the generation a hand-over granted (Granted),
	// as the announcement carried it: Resource, Fence, RequestID,
	// GrantedAt and ExpiresAt (Holder and Now are not carried). A waiter
	// that finds its own request in it need not read the lease row.
	Lease LeaseRow
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

// RefusalLogger is an optional capability of an Executor: recording a
// refusal as the SQL protocol's fencegate_log_refusal does (docs/SQL.md),
// the call a client in any language makes after its refused transaction
// rolled back. The database reads the floor again and records (resource,
// fence, holder, floor, floor holder) only when the fence is below the
// floor or was never issued, and reports whether it did; no caller can
// forge the evidence. gate's refusal log uses it where the executor of
// Driver.Executor has it, and Executor.RejectionInsert elsewhere.
//
// mysql's executor implements it, and so do the Postgres drivers' (pgxv5,
// pgsql: fencegate_refusal_record, the rule fencegate_log_refusal calls);
// SQLite's answers false, leaving the record to RejectionInsert.
type RefusalLogger interface {
	LogRefusal(ctx context.Context, resource, holder string, fence int64) (r Rejection, logged bool, err error)
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
	// GrantedAt and ExpiresAt, when ExpiresAt is set, date the generation
	// instead of the database's clock and TTL: a hand-over's, dated from
	// the waiter's last touch. They need Replace.
	GrantedAt, ExpiresAt time.Time
}

// LeaseRenewParams are the inputs of Executor.LeaseRenew, and one renewal
// of Executor.LeaseRenewBatch.
type LeaseRenewParams struct {
	Resource string
	Holder   string
	Fence    int64
	TTL      time.Duration
}

// LeaseRenewBatchParams are the inputs of Executor.LeaseRenewBatch.
type LeaseRenewBatchParams struct {
	Renewals []LeaseRenewParams
	// Sending, when set, is called once, right before the batch's first
	// statement goes out: after any wait for the transaction (SQLite's
	// write lock). The lease coordinator reads its requests' send instant
	// there.
	Sending func()
}

// LeaseReleaseParams are the inputs of Executor.LeaseRelease.
type LeaseReleaseParams struct {
	Resource string
	Holder   string
	Fence    int64
	// NameFirstWaiter asks for LeaseReleaseResult.FirstWaiter, which costs
	// a release a read of the queue (about 0.1 ms on loopback Postgres).
	NameFirstWaiter bool
	// Settled is the holder's word that the request that made the lease
	// was sent once, answered, and will never be sent again: no copy of it
	// can arrive later, so a store that records a generation's request
	// only when the generation is overwritten (Postgres: the lease row
	// holds the live request) need not record this one. Leave it false
	// when unsure; a store that records every request when it grants it
	// ignores it.
	Settled bool
}

// LeaseReleaseResult is the outcome of Executor.LeaseRelease.
type LeaseReleaseResult struct {
	Released bool
	// FirstWaiter is the place (Waiter.Seq) of the first live waiter of
	// the resource as the release ran, asked for by NameFirstWaiter: 0 when
	// not asked, when nothing was released, or when no waiter was queued
	// (then any waiter may look).
	FirstWaiter int64
}

// LeaseAcquireParams are the inputs of Executor.LeaseAcquire. It names one
// resource; a grant of several under one fence would add them here, so
// callers build it by field name.
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
	// Sending, when set, is called once, right before the acquisition's
	// first statement goes out: after any wait for the transaction
	// (SQLite's write lock). The lease coordinator reads the request's send
	// instant there, so that the wait is not taken off the lease.
	Sending func()
	// Members, when set, makes the acquisition a claim of every member at
	// once, under one fence, all or none (Resource is then ignored): the
	// names sorted, valid, without duplicates or a path with its own
	// directory (fence.ValidateSet), and the path rule kept for the path
	// names among them (gate's doc, Paths): no live claim of a directory
	// above one, nor, for a directory, of anything below it. A claim of one
	// path is a Members of one. The answer's Lease is the members' row whose
	// term ends first; a Held answer's is the blocking lease (a member, a
	// directory above one, a lease below one).
	Members []string
}

// LeaseAbandonParams are the inputs of Executor.LeaseAbandon: the request
// (Resource or Members, Holder, RequestID) as it was sent to LeaseAcquire.
type LeaseAbandonParams struct {
	Resource    string
	Members     []string // a claim of several resources or of a path, as LeaseAcquireParams.Members
	Holder      string
	RequestID   string
	LockTimeout time.Duration
}

// LeaseAbandonResult is the outcome of Executor.LeaseAbandon.
type LeaseAbandonResult struct {
	// Released is true when the request had made a live lease, which the
	// abandon released.
	Released bool
}

// AcquireStatus is the kind of answer Executor.LeaseAcquire gives.
type AcquireStatus int

// The answers of Executor.LeaseAcquire.
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

// LeaseAcquireResult is the outcome of Executor.LeaseAcquire.
type LeaseAcquireResult struct {
	Status AcquireStatus
	// Lease is the granted, retried or blocking lease row, with Now the
	// database's clock after any wait for its lock.
	Lease       LeaseRow
	Fence       int64  // AcquireRequestExpired: the request's fence; AcquireFloorAhead: the new fence
	Floor       int64  // AcquireFloorAhead only
	FloorHolder string // AcquireFloorAhead only
}
