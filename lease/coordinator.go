package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// MinTTL is the shortest lease term the Coordinator grants and a Client asks
// for: a shorter one would be over before its grant could reach the holder
// (a round trip to the database, plus a tick of SQLite's millisecond clock).
// A shorter ttl is refused as invalid input.
const MinTTL = 10 * time.Millisecond

// maxRequestIDLen bounds request ids; ours are 32 hex digits.
const maxRequestIDLen = 128

// CoordinatorOptions configure a Coordinator. A nil *CoordinatorOptions uses
// every default.
type CoordinatorOptions struct {
	// TTL is the term granted when a request asks for none. Defaults to 30s.
	TTL time.Duration

	// MaxTTL is the longest term granted; a longer request is refused as
	// invalid input. Defaults to 24h.
	MaxTTL time.Duration

	// LockTimeout bounds how long an acquisition waits for a row lock: the
	// resource's lease row (another acquisition) or its floor row (the
	// previous holder's write transaction, in co-located mode). When it
	// expires the acquisition is refused with an error matching ErrBusy and
	// nothing is granted. Postgres only: a SQLite transaction holds the
	// whole database from BEGIN, and its busy timeout bounds the wait.
	// Defaults to 2s.
	LockTimeout time.Duration

	// StartFence makes the first fence this coordinator issues at least
	// StartFence, to continue from another fence source (an older
	// coordinator, etcd revisions) whose fences already sit in the gate's
	// floors. It never lowers the sequence. It is applied once, in its own
	// transaction, before the coordinator's first grant. Defaults to 1 (no
	// effect).
	StartFence int64

	// WaiterTTL is how long a waiting acquisition (AcquireWait) keeps its
	// place in the queue without touching it. Waiters touch their place
	// every third of it, and look again then, so it also bounds how late a
	// waiter learns of a release it was not told of (SQLite across
	// processes, a lost notification). Defaults to 3s.
	WaiterTTL time.Duration

	// MeterProvider makes the coordinator's instruments (the package doc's
	// Observability lists them). Defaults to otel.GetMeterProvider(), the
	// global provider, which records nothing until the program installs an
	// OpenTelemetry SDK.
	MeterProvider metric.MeterProvider

	// TracerProvider makes the spans of Acquire, AcquireWait, Renew,
	// RenewBatch and Release. Defaults to otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MetricsByResource adds the resource's name (fencegate.resource) to
	// the coordinator's metric attributes. Defaults to false: resource
	// names are unbounded, and each one makes time series of its own.
	// Spans always carry it.
	MetricsByResource bool
}

// Coordinator grants, renews and releases leases, keeping them in the
// database it shares with the gate (sqlstore.Store, any dialect). Fences
// come from the database's sequence and expiry is computed in the database's
// clock, so a Coordinator holds no state of its own: any number of them, in
// any number of processes, can serve the same database, and a restarted one
// continues where the last left off.
//
// Because the gate's floors live in the same database, Acquire raises the
// resource's floor to the new fence in the granting transaction (co-located
// mode): from the moment a lease is granted, every older fence is refused,
// even before the new holder writes.
//
// Where the store says how many connections its pool opens
// (sqlstore.Store.MaxConns: both Postgres drivers, and the database/sql
// ones with SetMaxOpenConns), a Coordinator sends at most one fewer acquisitions
// and releases at a time; the rest wait their turn in the Coordinator,
// before their send instant is read. One connection then stays free for
// renewals (Renew, RenewBatch, Hold's keeper), so that a thousand queued
// acquirers do not starve the leases already held. Share one Coordinator
// per pool for the bound to hold.
//
// A Coordinator is safe for concurrent use.
type Coordinator struct {
	store       sqlstore.Store
	ttl         time.Duration
	maxTTL      time.Duration
	lockTimeout time.Duration
	startFence  int64
	waiterTTL   time.Duration
	waits       waitRoom    // AcquireWait's waiters in this process
	bg          *background // work that outlives the calls that started it, until Close
	obs         *obs
	settle      settler // leases granted to requests sent once, until released (settle.go)

	startMu   sync.Mutex
	startDone bool // StartFence was applied

	// slots bounds the acquisitions and releases in flight to one fewer
	// than the store's pool has connections (sqlstore.Store.MaxConns), so that
	// a renewal finds a connection free however many acquirers queue; nil
	// for no bound.
	slots    chan struct{}
	freeSlot func() // gives a slot back; one func value, made once
}

// NewCoordinator returns a Coordinator over store, which must be migrated
// (Store.Migrate). opts may be nil.
func NewCoordinator(store sqlstore.Store, opts *CoordinatorOptions) *Coordinator {
	if opts == nil {
		opts = &CoordinatorOptions{}
	}
	var slots chan struct{}
	if n := store.MaxConns(); n > 1 {
		slots = make(chan struct{}, n-1)
	}
	c := &Coordinator{
		slots:       slots,
		store:       store,
		ttl:         cmp.Or(opts.TTL, 30*time.Second),
		maxTTL:      cmp.Or(opts.MaxTTL, 24*time.Hour),
		lockTimeout: cmp.Or(opts.LockTimeout, 2*time.Second),
		startFence:  opts.StartFence,
		waiterTTL:   max(cmp.Or(opts.WaiterTTL, 3*time.Second), 3*MinTTL),
		obs:         newObs(opts),
		bg:          newBackground(),
	}
	c.freeSlot = func() { <-c.slots }
	return c
}

// AcquireOutcome is the coordinator's answer to an acquisition.
type AcquireOutcome struct {
	// OK is true when the lease was granted; Grant is then set.
	OK    bool
	Grant Grant

	// When OK is false, someone holds a live lease on the resource:
	HeldResource string        // the blocking lease's resource: a member, or a path above or below one
	HeldBy       string        // the holder
	Fence        int64         // its fence
	RetryAfter   time.Duration // how long until it expires, unless renewed
	ExpiresAt    clock.DBTime  // the same, in the database's clock, for logs
	AlreadyHeld  bool          // the holder is the requester itself (under another request)
}

// RenewOutcome is the coordinator's answer to a renewal.
type RenewOutcome struct {
	// OK is true when the lease was extended; Grant is then set, with the
	// same fence.
	OK    bool
	Grant Grant

	// Expired is true when the lease is no longer current at the
	// coordinator: it expired, was released, or was superseded by a newer
	// generation. It is never extended again; acquire a new one.
	Expired bool
	// HeldBy and Fence name the current live lease on the resource, if any
	// (the successor), when Expired is true.
	HeldBy string
	Fence  int64
}

// Status is an advisory view of a resource's lease at the database's clock.
// It is stale as soon as it is read: use it for dashboards, logs and
// deciding whether to try, never to decide whether a write is safe.
type Status struct {
	Resource string
	// Held is true when a live lease exists (unexpired and unreleased).
	Held bool
	// Holder and Fence describe the latest generation, live or not; Fence is
	// 0 for a resource that was never leased.
	Holder   string
	Fence    int64
	Released bool
	// Remaining is ExpiresAt - Now when Held, else 0.
	Remaining time.Duration
	GrantedAt clock.DBTime
	ExpiresAt clock.DBTime
	Now       clock.DBTime // the database's clock at the read
}

// Acquire grants req's holder a new lease on req.Resource, with a fence above
// every fence issued before, or says who holds it.
//
// A live lease is never taken over. If it belongs to the requester under the
// same request id (a retry after a lost reply), the answer is the existing
// grant, with the time it has left, to every copy of the request, however
// many arrive at once: the lease is stored in the database, so this holds
// across coordinator restarts. Under another request id the requester is
// denied with AlreadyHeld: a holder must not hold a lease twice. Another
// holder sending the live lease's request id is denied like any other,
// with HeldBy naming the lease's holder.
// A request that made a lease is never granted again once that lease expired
// or was released: the database remembers every request id that made a
// generation, except one this Coordinator knows was sent once and settled
// at its release (settle.go), which it refuses itself; such a late retry
// gets an error matching ErrRequestExpired.
//
// In the granting transaction the gate's floor for the resource is raised to
// the new fence, so stale holders are refused from now on. If the previous
// holder's write transaction holds the floor row, Acquire waits at most
// LockTimeout and then returns an error matching ErrBusy, with nothing
// granted.
//
// The acquisition is the store's Executor.LeaseAcquire: on Postgres one
// statement, so one round trip (two for a late retry, or a floor above the
// sequence, over a free lease row: the fast statement rolls back and a
// careful one answers); on SQLite and MySQL a transaction of one statement
// per step, under the same rules.
//
// Errors: fence.ErrInvalidInput for a bad request (including a ttl below
// MinTTL or above MaxTTL), ErrRequestExpired, ErrFloorAhead, ErrBusy, or the
// database's error.
func (c *Coordinator) Acquire(ctx context.Context, req *AcquireRequest) (AcquireOutcome, error) {
	return c.acquire(ctx, req, 0)
}

// acquire is Acquire for the waiter at place waiter (0 for none), whose
// place a grant takes out of the queue (sqlstore.LeaseAcquireParams.Waiter).
func (c *Coordinator) acquire(ctx context.Context, req *AcquireRequest, waiter int64) (out AcquireOutcome, err error) {
	ctx, op := c.obs.startAcquire(ctx, req)
	defer op.endAcquire(ctx, req, &out, &err)
	if req == nil {
		return AcquireOutcome{}, invalid("request", "is nil")
	}
	members, err := checkMembers(req.Resource, req.Resources)
	if err != nil {
		return AcquireOutcome{}, err
	}
	ttl, err := c.checkRequest(members[0], req.Holder, req.RequestID, req.TTL)
	if err != nil {
		return AcquireOutcome{}, err
	}
	if err := c.applyStartFence(ctx); err != nil {
		return AcquireOutcome{}, err
	}
	free, err := c.takeSlot(ctx)
	if err != nil {
		return AcquireOutcome{}, c.wrap("acquire", req.Resource, err)
	}
	defer free()
	// What the closure reads and fills in, in one allocation.
	call := &struct {
		p       sqlstore.LeaseAcquireParams
		res     sqlstore.LeaseAcquireResult
		late    bool
		settled bool
	}{p: sqlstore.LeaseAcquireParams{
		Resource:    req.Resource,
		Holder:      req.Holder,
		RequestID:   req.RequestID,
		TTL:         ttl,
		LockTimeout: c.lockTimeout,
		Waiter:      waiter,
		// The connection (or SQLite's write lock) is in hand: the request
		// goes out now.
		Sending: req.restamp,
	}}
	if claimsSet(members) {
		call.p.Members = members // several, or a path: acquired by the set's rules
	}
	acquire := func(ex sqlstore.Executor) error {
		// A retry whose first sending is more than its term ago is refused
		// here, the connection in hand: its row may have been pruned
		// (Coordinator.Prune says why that is safe).
		if call.late = lateRetry(req, ttl); call.late {
			return nil
		}
		// A request whose lease was released settled is never sent again
		// (settle.go): its record may be gone with the lease row.
		if call.settled = !req.countSend(); call.settled {
			return nil
		}
		var err error
		call.res, err = ex.LeaseAcquire(ctx, &call.p)
		return err
	}
	if call.p.Members != nil {
		// The set's steps run in a transaction of their own, which takes
		// its connection: a pinned one would sit idle beside it, and a
		// full pool would wait on itself.
		err = acquire(c.store.Executor())
	} else {
		err = c.store.OnConn(ctx, acquire)
	}
	if err != nil {
		return AcquireOutcome{}, c.wrap("acquire", req.name(), err)
	}
	if call.late {
		return AcquireOutcome{}, fmt.Errorf("%w: %q: request %s was first sent more than its term (%v) ago; a lease it made would be over on arrival",
			ErrRequestExpired, req.name(), req.RequestID, ttl)
	}
	if call.settled {
		return AcquireOutcome{}, fmt.Errorf("%w: %q: request %s made a lease that its holder released", ErrRequestExpired, req.name(), req.RequestID)
	}
	res := call.res
	if res.Status == sqlstore.AcquireGranted && call.p.Members == nil && waiter == 0 {
		c.settle.granted(settleKey{res.Lease.Resource, res.Lease.Holder, res.Lease.Fence}, req, ttl)
	}
	switch res.Status {
	case sqlstore.AcquireGranted, sqlstore.AcquireRetried:
		// A retry of the request that made the lease gets the same grant,
		// with the time it has left: the holder dates it from the
		// (earlier) instant it first sent the request.
		g := c.grantOf(res.Lease, req.RequestID)
		if len(req.Resources) > 0 {
			g.Resource = ""
		}
		return AcquireOutcome{OK: true, Grant: g}, nil
	case sqlstore.AcquireHeld:
		row := res.Lease
		return AcquireOutcome{
			HeldResource: row.Resource,
			HeldBy:       row.Holder,
			Fence:        row.Fence,
			RetryAfter:   row.ExpiresAt.Sub(row.Now),
			ExpiresAt:    clock.NewDBTime(row.ExpiresAt),
			AlreadyHeld:  row.Holder == req.Holder,
		}, nil
	case sqlstore.AcquireRequestExpired:
		// A late retry of a request whose lease is over: granting it again
		// would lock the resource for a holder that gave up.
		return AcquireOutcome{}, fmt.Errorf("%w: %q: request %s made the lease with fence %d, which expired or was released",
			ErrRequestExpired, req.name(), req.RequestID, res.Fence)
	case sqlstore.AcquireFloorAhead:
		return AcquireOutcome{}, fmt.Errorf("%w: %q: floor %d (raised by %q) is above the new fence %d; "+
			"set CoordinatorOptions.StartFence above %d", ErrFloorAhead, req.name(), res.Floor, res.FloorHolder, res.Fence, res.Floor)
	}
	return AcquireOutcome{}, fmt.Errorf("fencegate: acquire %q: the store answered status %d", req.name(), res.Status)
}

// grantOf describes a lease row as a grant, with the time it has left at the
// database's clock, less one tick of that clock (Store.ClockPrecision): the
// recorded grant time can be up to a tick earlier than the moment the
// holder's request was processed (SQLite's clock has whole milliseconds),
// and without the margin the holder's window could outlast the
// coordinator's by that tick when ClockSkew is 0.
func (c *Coordinator) grantOf(row sqlstore.LeaseRow, requestID string) Grant {
	tick := c.store.ClockPrecision()
	return Grant{
		Resource:             row.Resource,
		Holder:               row.Holder,
		Fence:                row.Fence,
		RequestID:            requestID,
		TTL:                  max(row.ExpiresAt.Sub(row.Now)-tick, 0),
		CoordinatorExpiresAt: clock.NewDBTime(row.ExpiresAt),
	}
}

// Renew extends the live lease (req.Resource, req.Holder, req.Fence) to
// req.TTL (or the default) after the database's clock, keeping its fence.
// A lease that expired, was released, or was superseded is never extended:
// the outcome is Expired and the holder must acquire again.
//
// A renewal never shortens a lease: the new expiry is the later of the
// current one and the database's clock plus the ttl, because a holder may
// already have been given the current one as its deadline (a Kept lease,
// whose keeper renews it with its own ttl). A renewal with a shorter ttl
// than the time left is answered OK with the lease as it is, and its
// Grant's TTL is the time left. Release a lease to end it early.
//
// Errors: fence.ErrInvalidInput for a bad request, ErrUnknownResource for a
// resource that was never leased, ErrBusy, or the database's error.
func (c *Coordinator) Renew(ctx context.Context, req *RenewRequest) (out RenewOutcome, err error) {
	ctx, op := c.obs.startRenew(ctx, req)
	defer op.endRenew(&out, &err)
	if req == nil {
		return RenewOutcome{}, invalid("request", "is nil")
	}
	members, err := checkMembers(req.Resource, req.Resources)
	if err != nil {
		return RenewOutcome{}, err
	}
	ttl, err := c.checkRequest(members[0], req.Holder, req.RequestID, req.TTL)
	if err != nil {
		return RenewOutcome{}, err
	}
	if req.Fence <= 0 {
		return RenewOutcome{}, invalid("fence", "must be positive, got %d", req.Fence)
	}
	if len(members) > 1 {
		row, err := c.renewSet(ctx, req, sqlstore.LeaseRenewParams{Holder: req.Holder, Fence: req.Fence, TTL: ttl})
		if err != nil {
			return RenewOutcome{}, c.wrap("renew", req.name(), err)
		}
		if !row.Found {
			return RenewOutcome{Expired: true}, nil
		}
		g := c.grantOf(row, req.RequestID)
		g.Resource = ""
		return RenewOutcome{OK: true, Grant: g}, nil
	}
	// What the closure reads and fills in, in one allocation.
	call := &struct {
		p   sqlstore.LeaseRenewParams
		row sqlstore.LeaseRow
	}{p: sqlstore.LeaseRenewParams{Resource: req.Resource, Holder: req.Holder, Fence: req.Fence, TTL: ttl}}
	err = c.store.OnConn(ctx, func(pinned sqlstore.Executor) error {
		req.restamp() // the connection is in hand: the request goes out now
		var err error
		call.row, err = pinned.LeaseRenew(ctx, &call.p)
		return err
	})
	if err != nil {
		return RenewOutcome{}, c.wrap("renew", req.Resource, err)
	}
	if row := call.row; row.Found {
		return RenewOutcome{OK: true, Grant: c.grantOf(row, req.RequestID)}, nil
	}
	// Not renewed. Tell an unknown resource (a caller's mistake) from a
	// lease that is over; the read is informative only.
	cur, err := c.store.Executor().LeaseGet(ctx, req.Resource)
	if errors.Is(err, sqlstore.ErrNotFound) {
		return RenewOutcome{}, fmt.Errorf("%w: %q", ErrUnknownResource, req.Resource)
	}
	if err != nil {
		return RenewOutcome{}, c.wrap("renew", req.Resource, err)
	}
	out = RenewOutcome{Expired: true}
	if cur.Live() {
		out.HeldBy, out.Fence = cur.Holder, cur.Fence
	}
	return out, nil
}

// RenewBatch renews many leases at once, by the store's
// Executor.LeaseRenewBatch: on Postgres one statement, so one round trip,
// else one transaction of one renewal per lease (SQLite, MySQL). It returns
// one outcome per request, in order, each as Renew's: OK with the grant
// (whose TTL is dated, like Renew's, from the request's SentAt), or Expired
// for a lease that is released, expired or superseded. Unlike Renew it does
// not read who holds an expired lease now (HeldBy and Fence are empty), nor
// tell a resource that was never leased from one whose lease is over:
// both are Expired. Each lease answers for itself: one lost lease does not
// fail the batch. A lease named by more than one request is renewed once,
// to the longest of their terms (as renewing it once per request would,
// since a renewal never shortens a lease), and every one of them gets that
// outcome, on every store.
//
// The batch fails as a whole or not at all: an invalid request (nothing is
// sent) or a database error (nothing is known to be renewed; send new
// requests to retry) is the error, matched as Renew's are.
func (c *Coordinator) RenewBatch(ctx context.Context, reqs []*RenewRequest) (outs []RenewOutcome, err error) {
	ctx, op := c.obs.startRenewBatch(ctx, reqs)
	defer op.endRenewBatch(&outs, &err)
	// ps holds each lease once; request i is answered by renewal of[i].
	ps := make([]sqlstore.LeaseRenewParams, 0, len(reqs))
	of := make([]int, len(reqs))
	type leaseKey struct {
		resource, holder string
		fence            int64
	}
	seen := make(map[leaseKey]int, len(reqs))
	var sets []int // the requests renewing a set's lease: each in a transaction of its own (renewSet)
	for i, req := range reqs {
		if req == nil {
			return nil, invalid("request", "%d of the batch is nil", i)
		}
		if len(req.Resources) > 0 {
			if _, err := checkMembers(req.Resource, req.Resources); err != nil {
				return nil, err
			}
			if _, err := c.checkRequest(req.Resources[0], req.Holder, req.RequestID, req.TTL); err != nil {
				return nil, err
			}
			sets, of[i] = append(sets, i), -1
			continue
		}
		ttl, err := c.checkRequest(req.Resource, req.Holder, req.RequestID, req.TTL)
		if err != nil {
			return nil, err
		}
		if req.Fence <= 0 {
			return nil, invalid("fence", "must be positive, got %d", req.Fence)
		}
		k := leaseKey{req.Resource, req.Holder, req.Fence}
		if j, dup := seen[k]; dup {
			of[i], ps[j].TTL = j, max(ps[j].TTL, ttl)
			continue
		}
		seen[k], of[i] = len(ps), len(ps)
		ps = append(ps, sqlstore.LeaseRenewParams{Resource: req.Resource, Holder: req.Holder, Fence: req.Fence, TTL: ttl})
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	restamp := func() {
		for _, req := range reqs {
			req.restamp()
		}
	}
	var rows []sqlstore.LeaseRow
	if len(ps) > 0 { // not only sets
		err = c.store.OnConn(ctx, func(ex sqlstore.Executor) error {
			var err error
			rows, err = ex.LeaseRenewBatch(ctx, &sqlstore.LeaseRenewBatchParams{
				Renewals: ps,
				Sending:  restamp, // the connection (or the transaction) is in hand
			})
			return err
		})
	}
	if err == nil && len(rows) != len(ps) {
		err = fmt.Errorf("the store answered %d of %d renewals", len(rows), len(ps))
	}
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("renew %d leases", len(reqs)), "", err)
	}
	outs = make([]RenewOutcome, len(reqs))
	for _, i := range sets {
		if outs[i], err = c.Renew(ctx, reqs[i]); err != nil {
			return nil, err
		}
	}
	for i, req := range reqs {
		if of[i] < 0 {
			continue // a set's, answered above
		}
		if row := rows[of[i]]; row.Found {
			outs[i] = RenewOutcome{OK: true, Grant: c.grantOf(row, req.RequestID)}
		} else {
			outs[i] = RenewOutcome{Expired: true}
		}
	}
	return outs, nil
}

// takeSlot waits for one of the acquisitions' and releases' slots (see
// Coordinator.slots), until ctx ends, and returns the function that frees
// it.
func (c *Coordinator) takeSlot(ctx context.Context) (free func(), err error) {
	if c.slots == nil {
		return noSlot, nil
	}
	select {
	case c.slots <- struct{}{}:
		return c.freeSlot, nil // made once in NewCoordinator: no allocation per call
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

func noSlot() {}

// Release ends the live lease the token names and reports whether it did. A
// stale token (an older fence, another holder, a lease already expired or
// released) is a no-op that returns false: a late release never frees a
// successor's lease. The gate's floor is left as it is, so the released
// fence stays valid at the gate until a newer one is granted.
//
// On Postgres a release commits without waiting for its WAL to be flushed
// (synchronous_commit off for its own transaction, a fsync saved): a release
// lost in a crash or failover only keeps the resource locked until the
// lease's expiry, as if the holder had not released it. Grants and renewals
// commit synchronously.
//
// Errors: fence.ErrInvalidInput for an invalid token, ErrBusy, or the
// database's error.
func (c *Coordinator) Release(ctx context.Context, token fence.Token) (released bool, err error) {
	ctx, op := c.obs.startRelease(ctx, token)
	defer op.endRelease(&released, &err)
	if err := token.Validate(); err != nil {
		return false, err
	}
	free, err := c.takeSlot(ctx)
	if err != nil {
		return false, c.wrap("release", token.Name(), err)
	}
	if token.IsSet() {
		defer free()
		ok, err := c.releaseSet(ctx, token)
		if ok {
			for _, m := range token.Members() {
				c.waits.announced(sqlstore.LeaseChange{Resource: m})
			}
		}
		return ok, err
	}
	// The first waiter only with waiters of its own on the resource: the
	// read of the queue costs a release about 0.1 ms on loopback (bench/,
	// scenario 3), and without them it would wake nobody here.
	res, err := c.store.Executor().LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{
		Resource:        token.Resource,
		Holder:          token.Holder,
		Fence:           token.Fence,
		NameFirstWaiter: c.waits.has(token.Resource),
		Settled:         c.settle.release(settleKey{token.Resource, token.Holder, token.Fence}),
	})
	free()
	if err != nil {
		return false, c.wrap("release", token.Resource, err)
	}
	if res.Released {
		// At once, as the database's announcement would: the first
		// waiter, if it waits here, straight to its acquisition (its
		// touch would only say it is first); if it waits elsewhere,
		// nobody here; if the store cannot tell, this Coordinator's first.
		c.waits.announced(sqlstore.LeaseChange{Resource: token.Resource, First: res.FirstWaiter})
	}
	return res.Released, nil
}

// ReleaseStrict is Release for a caller that wants to know why nothing was
// released: it returns nil when it released the token's lease, and a
// *ReleaseError (matching ErrNotReleased, its Reason one of
// ReleaseExpired, ReleaseAlreadyReleased, ReleaseSuperseded and
// ReleaseNeverHeld) when the token named no live lease. The reason is
// read after the release (one more statement, only then), so it describes
// the resource a moment later: a lease that expired may have been granted
// to someone else meanwhile, and is then reported superseded.
//
// Other errors are Release's.
func (c *Coordinator) ReleaseStrict(ctx context.Context, token fence.Token) error {
	ok, err := c.Release(ctx, token)
	if err != nil || ok {
		return err
	}
	nr := &ReleaseError{Resource: token.Name(), Holder: token.Holder, Fence: token.Fence}
	row, err := c.store.Executor().LeaseGet(ctx, token.Members()[0]) // a set's members share their fate
	switch {
	case errors.Is(err, sqlstore.ErrNotFound):
		nr.Reason = ReleaseNeverHeld
		return nr
	case err != nil:
		return fmt.Errorf("fencegate: release %q released nothing, and reading why failed: %w", token.Resource, err)
	}
	nr.HeldBy, nr.CurrentFence = row.Holder, row.Fence
	switch {
	case row.Fence > token.Fence:
		nr.Reason = ReleaseSuperseded
	case row.Fence < token.Fence || row.Holder != token.Holder:
		nr.Reason = ReleaseNeverHeld
	case row.Released:
		nr.Reason = ReleaseAlreadyReleased
	default:
		// Unreleased and not live when the release ran (a row that is
		// live now, with the same fence, cannot be: a generation that
		// expired is never renewed).
		nr.Reason = ReleaseExpired
	}
	return nr
}

// Status reads the lease of one resource. A resource that was never leased
// has a zero Status apart from Resource. Advisory: see Status.
func (c *Coordinator) Status(ctx context.Context, resource string) (Status, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return Status{}, err
	}
	row, err := c.store.Executor().LeaseGet(ctx, resource)
	if errors.Is(err, sqlstore.ErrNotFound) {
		return Status{Resource: resource}, nil
	}
	if err != nil {
		return Status{}, c.wrap("status", resource, err)
	}
	return statusOf(row), nil
}

// List reads the lease of every resource that was ever leased, ordered by
// resource. Advisory: see Status.
func (c *Coordinator) List(ctx context.Context) ([]Status, error) {
	rows, err := c.store.Executor().LeaseList(ctx)
	if err != nil {
		return nil, fmt.Errorf("fencegate: list: %w", err)
	}
	out := make([]Status, len(rows))
	for i, row := range rows {
		out[i] = statusOf(row)
	}
	return out, nil
}

func statusOf(row sqlstore.LeaseRow) Status {
	s := Status{
		Resource:  row.Resource,
		Held:      row.Live(),
		Holder:    row.Holder,
		Fence:     row.Fence,
		Released:  row.Released,
		GrantedAt: clock.NewDBTime(row.GrantedAt),
		ExpiresAt: clock.NewDBTime(row.ExpiresAt),
		Now:       clock.NewDBTime(row.Now),
	}
	if s.Held {
		s.Remaining = row.ExpiresAt.Sub(row.Now)
	}
	return s
}

// checkRequest validates the wire fields shared by acquisitions and
// renewals and returns the term to grant.
func (c *Coordinator) checkRequest(resource, holder, requestID string, ttl time.Duration) (time.Duration, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return 0, err
	}
	if err := fence.ValidateHolder(holder); err != nil {
		return 0, err
	}
	if err := validateRequestID(requestID); err != nil {
		return 0, err
	}
	ttl = cmp.Or(ttl, c.ttl) // 0 asks for the default
	switch {
	case ttl < MinTTL:
		return 0, invalid("ttl", "%v is below the minimum of %v", ttl, MinTTL)
	case ttl > c.maxTTL:
		return 0, invalid("ttl", "%v is above the coordinator's maximum of %v", ttl, c.maxTTL)
	}
	return ttl, nil
}

// validateRequestID accepts 1 to maxRequestIDLen printable ASCII characters:
// enough for any id scheme, and nothing that could surprise a log reader.
func validateRequestID(id string) error {
	if id == "" || len(id) > maxRequestIDLen {
		return invalid("request id", "must be 1 to %d bytes, got %d", maxRequestIDLen, len(id))
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] >= utf8.RuneSelf || id[i] == 0x7f {
			return invalid("request id", "%q must be printable ASCII without spaces", id)
		}
	}
	return nil
}

// applyStartFence moves the sequence up to StartFence once per Coordinator,
// before its first grant. FenceAtLeast must run in its own transaction (on
// Postgres it locks the sequence until commit), so it cannot share the
// acquisition's.
func (c *Coordinator) applyStartFence(ctx context.Context) error {
	if c.startFence <= 1 {
		return nil
	}
	c.startMu.Lock()
	defer c.startMu.Unlock()
	if c.startDone {
		return nil
	}
	err := c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		return ex.FenceAtLeast(ctx, c.startFence)
	})
	if err != nil {
		return c.wrap("apply start fence", "", err)
	}
	c.startDone = true
	return nil
}

// Store returns the store c coordinates over, as NewCoordinator was given
// it: for a client of the coordinator that keeps state of its own there
// (the semaphore package stores its N there) or listens for releases
// (Store.WatchLeases).
func (c *Coordinator) Store() sqlstore.Store { return c.store }

// WaiterTTL returns how long a waiting acquisition keeps its place in the
// queue without touching it: CoordinatorOptions.WaiterTTL, or its default.
// A waiter touches its place, and looks again, every third of it; a client
// that polls on its own (an election's observer, a semaphore's head of the
// line) can keep the same pace.
func (c *Coordinator) WaiterTTL() time.Duration { return c.waiterTTL }

// wrap labels a database error, marking retryable ones with ErrBusy.
func (c *Coordinator) wrap(op, resource string, err error) error {
	var target *fence.InvalidInputError
	if errors.As(err, &target) || errors.Is(err, ErrFloorAhead) || errors.Is(err, ErrRequestExpired) {
		return err
	}
	if sqlstore.IsRetryable(err) {
		err = &busyError{err}
	}
	if resource == "" {
		return fmt.Errorf("fencegate: %s: %w", op, err)
	}
	return fmt.Errorf("fencegate: %s %q: %w", op, resource, err)
}
