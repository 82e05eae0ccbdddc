package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// busyWait is how soon a waiter whose turn has come looks again after the
// database said busy (the previous holder's write still holds the floor
// row, a concurrent acquisition): a transaction's length, not a lease's.
const busyWait = 10 * time.Millisecond

// cleanupTimeout bounds taking a waiter out of the queue after its context
// ended; if the database does not answer in time the place is left to run
// out (WaiterTTL). It bounds releasing what an acquisition whose outcome is
// unknown may have been granted too (releaseUnknown), and each of its
// attempts in the background (retryAbandon).
const cleanupTimeout = 5 * time.Second

// listenRetry is the pause before listening again after the listening
// connection failed. Waiters keep their timers meanwhile.
const listenRetry = 100 * time.Millisecond

// AcquireWait acquires resource for client's holder like Acquire, but when
// the resource is held it waits its turn, until the lease is granted or ctx
// ends. It returns the Lease, dated from the request that was granted (each
// attempt is a fresh request, so the time spent waiting never shortens it).
//
// # Order
//
// Waiters queue in the database (fencegate_waiter), so the order holds across
// coordinators and processes: a waiter is granted only when the resource is
// free and it is the first live waiter of the resource's queue. Its place is
// fixed when it joins, by one statement; of two waiters that join at the same
// moment either may come first, but a waiter that joined after another had
// joined is granted after it. A waiter keeps its place by touching it every
// third of CoordinatorOptions.WaiterTTL; one whose process died or stalled
// for longer leaves the queue when the WaiterTTL runs out (a stalled one
// joins again at the back). A waiter whose context ends leaves at once.
// Waiters cannot starve one another: each release goes to the first.
//
// Plain acquisitions (Acquire, and Hold without Wait) do not queue: one that
// finds the resource free takes it even while waiters wait. Mix them with
// waiters only where that is acceptable.
//
// # Hand-over
//
// A release, and a waiter leaving the queue ungranted, wake the first
// waiter this Coordinator has on the resource at once. On Postgres
// (sqlstore.LeaseReleaseParams.NameFirstWaiter) a release reads the first live waiter of
// the whole queue in its own statement and wakes it only if it waits in
// this Coordinator, sending it straight to its acquisition as an
// announcement naming it does (below). A waiter's grant takes its place out
// of the queue in the grant's own transaction, so AcquireWait returns with
// the grant and a release that follows finds the next waiter first; it
// wakes nobody (the next would only find the lease held). On Postgres
// (sqlstore.Store.SupportsListener) the database announces releases, and the
// first waiter leaving while the lease is free, to every process
// (LISTEN/NOTIFY, one listening connection per Coordinator while it has
// waiters and for up to a second after its last one left, so that waiters
// that come and go find it listening), naming the first live waiter of the whole queue: only that one
// is woken, wherever it waits, and it goes straight to its acquisition (one
// round trip, its place already known to be first) unless its last touch is
// half a WaiterTTL old. Without announcements (SQLite, or a lost one: the
// listening connection cut) a waiter looks again when the holder's lease
// expires and on every touch of its place, so a lost wake-up costs latency,
// never order or correctness. A waiter that becomes first behind a live
// holder (the one before it gave up) learns the holder's expiry at its next
// touch, within a third of WaiterTTL. No waiter holds a transaction or a row
// lock while it waits.
//
// On Postgres the queue is an UNLOGGED table and its statements commit
// without a WAL flush: the queue orders waiters, the lease row and the fence
// decide who may write, so a crash that empties the queue costs the waiters
// their order once (they queue again), never a fence's safety.
//
// A holder that was killed without releasing still blocks its waiters until
// its lease expires: the coordinator trusts no sign of liveness but the
// lease's term.
//
// Errors: as Acquire, except that ErrBusy is waited out; a *HeldError
// (ErrHeld) at once when client's holder already holds the resource; and when
// ctx ends, ctx's error joined with a *HeldError saying who held the
// resource when the wait ended, and with an error saying so when its place
// could not be taken out of the queue (it then runs out within WaiterTTL).
//
// An acquisition whose outcome is unknown (ctx ended while it was out, or
// its reply was lost) may have been granted though AcquireWait returns no
// Lease: AcquireWait then releases whatever it was granted (it sends the
// request again, which answers that grant, and releases it), within the
// same bound as leaving the queue, even after ctx ended. If that fails, its
// error says so, and the Coordinator goes on trying in the background, with
// pauses growing to 5s, until the release succeeds (the network healed),
// the term asked for has passed, or Close: the lease stays held until then.
// Hold, with or without Wait, does the same.
func (c *Coordinator) AcquireWait(ctx context.Context, client *Client, resource string) (got *Lease, err error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, err
	}
	return c.acquireWait(ctx, client, []string{resource})
}

// acquireWait is AcquireWait for a claim of members (sorted, valid), which
// queues for the first.
func (c *Coordinator) acquireWait(ctx context.Context, client *Client, members []string) (got *Lease, err error) {
	resource := members[0] // the queue waited in
	ctx, op := c.obs.startWait(ctx, client, resource)
	defer op.endWait(ctx, &got, &err)
	if client == nil {
		return nil, invalid("client", "is nil")
	}
	ex := c.store.Executor()
	// Nobody queued: try at once, as Acquire does, and queue only if held.
	// A waiter that joins meanwhile came later, so the order holds.
	if empty, err := c.queueEmpty(ctx, resource); err == nil && empty {
		l, out, err := c.tryAcquire(ctx, client, members, 0)
		switch {
		case l != nil:
			return l, nil
		case err == nil && out.AlreadyHeld:
			return nil, heldError(resource, out)
		case err != nil && !errors.Is(err, ErrBusy):
			if ctx.Err() != nil {
				return nil, errors.Join(c.waitEnded(ctx, resource, nil), leftGrant(err))
			}
			return nil, err
		}
	}
	seq, hreq, err := c.enqueue(ctx, client, members)
	if err != nil {
		if ctx.Err() != nil {
			return nil, c.waitEnded(ctx, resource, nil)
		}
		return nil, err
	}
	w := c.waits.join(c, resource, seq)
	touched := time.Now() // no later than the database's stamp of the place
	granted := false
	defer func() {
		// A grant took the place out of the queue in its own transaction
		// (before the lease can be released, so a release never finds it
		// ahead of the next waiter). Otherwise out of the queue even when
		// ctx ended, but not for long: a place left behind runs out by
		// itself. Then, unless granted, wake the next waiter, which would
		// otherwise still find this place ahead of its own, and release
		// what a hand-over granted the place before it left.
		if !granted {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			if rerr := ex.WaiterRemove(rctx, w.place()); rerr != nil {
				err = errors.Join(err, fmt.Errorf("fencegate: leave the queue for %q: place %d stays until it runs out (within %v), and the next waiter waits behind it until then: %w",
					resource, w.place(), c.waiterTTL, rerr))
			} else if rerr := c.spendHandOver(rctx, hreq); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		c.waits.leave(w, granted, min(c.waiterTTL/3, listenLinger))
	}()
	// handedOver ends the wait when a hand-over granted the place: the
	// generation an announcement carried, or else the lease row read.
	handedOver := func(carried sqlstore.LeaseRow) (*Lease, bool, error) {
		l, err := c.handedOver(ctx, client, hreq, carried)
		if l != nil {
			granted = true
			c.obs.handedOver(ctx, w)
		}
		return l, l != nil, err
	}

	var held *HeldError // the last refusal, for the error when ctx ends
	for {
		delay := c.waiterTTL / 3
		var (
			first int64
			kept  bool
			err   error
		)
		if handed, row := w.takeHanded(); handed {
			// An announcement said a hand-over granted this place.
			if l, ok, err := handedOver(row); ok || err != nil {
				return l, err
			}
		}
		if w.takeTurn() && time.Since(touched) < c.waiterTTL/2 {
			// An announcement named this place the first live one, and the
			// place has not run out since (its last touch is recent): the
			// touch would say so again, so go straight to the acquisition.
			first, kept = w.place(), true
		} else {
			t, at := time.Now(), client.clock.Now()
			if first, kept, err = ex.WaiterTouch(ctx, resource, w.place(), c.waiterTTL); err == nil && kept {
				touched = t
				if hreq != nil {
					hreq.reanchor(at) // a hand-over reads this touch or a later one
				}
			}
		}
		switch {
		case ctx.Err() != nil:
			return nil, c.waitEnded(ctx, resource, held)
		case err != nil && !sqlstore.IsRetryable(err):
			return nil, c.wrap("wait for", resource, err)
		case err != nil:
			delay = busyWait
		case !kept:
			// A hand-over granted our place, or it ran out (this process
			// stalled for a WaiterTTL): then queue again, at the back.
			if l, ok, err := handedOver(sqlstore.LeaseRow{}); ok || err != nil {
				return l, err
			}
			seq, req, err := c.enqueue(ctx, client, members)
			if err != nil {
				if ctx.Err() != nil {
					return nil, c.waitEnded(ctx, resource, held)
				}
				return nil, err
			}
			hreq = req
			c.waits.move(w, seq)
			touched = time.Now()
			continue
		case first == w.place():
			l, out, err := c.tryAcquire(ctx, client, members, first)
			switch {
			case l != nil:
				granted = true
				c.obs.handedOver(ctx, w)
				return l, nil
			case ctx.Err() != nil:
				return nil, errors.Join(c.waitEnded(ctx, resource, held), leftGrant(err))
			case errors.Is(err, ErrBusy):
				delay = busyWait
			case err != nil:
				return nil, err
			case out.AlreadyHeld:
				// Held by this holder: a hand-over granted our place
				// after the touch, or another lease of the holder's.
				if l, ok, err := handedOver(sqlstore.LeaseRow{}); ok || err != nil {
					return l, err
				}
				return nil, heldError(resource, out)
			default:
				held = heldError(resource, out)
				// Look again when the holder's lease expires, if no
				// release wakes us first; a tick later, so the database's
				// clock has passed the expiry too.
				delay = min(delay, out.RetryAfter+c.store.ClockPrecision())
			}
		}
		if !c.waits.sleep(ctx, w, delay) {
			return nil, c.waitEnded(ctx, resource, held)
		}
	}
}

// enqueue puts client's holder at the back of the queue of members[0]
// and returns its place. A claim of one plain resource also takes a
// hand-over (Executor.LeaseHandOver): its place carries a fresh request,
// hreq, dated from the instant WaiterAdd was sent and later from each
// touch of the place that was answered.
func (c *Coordinator) enqueue(ctx context.Context, client *Client, members []string) (seq int64, hreq *AcquireRequest, err error) {
	resource := members[0]
	p := sqlstore.WaiterAddParams{Resource: resource, Holder: client.Holder(), TTL: c.waiterTTL}
	if !claimsSet(members) {
		if hreq, err = client.BeginAcquire(resource); err != nil {
			return 0, nil, err
		}
		if p.Term, err = c.checkRequest(resource, hreq.Holder, hreq.RequestID, hreq.TTL); err != nil {
			return 0, nil, err
		}
		p.RequestID = hreq.RequestID
	}
	at := client.clock.Now()
	if seq, err = c.store.Executor().WaiterAdd(ctx, &p); err != nil {
		return 0, nil, c.wrap("wait for", resource, err)
	}
	if hreq != nil {
		hreq.reanchor(at)
	}
	return seq, hreq, nil
}

// queueEmpty reports whether nobody waits for resource. With waiters of
// its own on it, c knows without the round trip.
func (c *Coordinator) queueEmpty(ctx context.Context, resource string) (bool, error) {
	if c.waits.has(resource) {
		return false, nil
	}
	ws, err := c.store.Executor().WaiterList(ctx, resource)
	return len(ws) == 0, err
}

// TryAcquire acquires resource for client's holder at once, or returns a
// *HeldError (ErrHeld) naming who holds it, without waiting: BeginAcquire,
// Acquire and CompleteAcquire in one call, for a client that does not keep
// the request. An acquisition whose outcome is unknown (ctx ended while it
// was out, or its reply was lost) releases what it may have been granted,
// as AcquireWait does, and returns its error. It does not jump
// AcquireWait's queue: with waiters in line the resource is held by one of
// them or free for the first. Errors otherwise: as Acquire's.
func (c *Coordinator) TryAcquire(ctx context.Context, client *Client, resource string) (*Lease, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, err
	}
	l, out, err := c.tryAcquire(ctx, client, []string{resource}, 0)
	if err == nil && l == nil {
		return nil, heldError(cmp.Or(out.HeldResource, resource), out)
	}
	return l, err
}

// tryAcquire makes one acquisition of resource with a fresh request, for the
// waiter at place waiter (0 for none), which a grant takes out of the queue.
// When the acquisition was sent and its outcome is unknown (ctx ended, or
// the reply was lost), what it may have been granted is released
// (releaseUnknown): the caller never sees the request, so nobody else could.
func (c *Coordinator) tryAcquire(ctx context.Context, client *Client, members []string, waiter int64) (*Lease, AcquireOutcome, error) {
	req, err := client.BeginAcquireSet(members)
	if err != nil {
		return nil, AcquireOutcome{}, err
	}
	out, err := c.acquire(ctx, req, waiter)
	if err != nil && req.sent() && (ctx.Err() != nil || sqlstore.IsOutcomeUnknown(err)) {
		return nil, out, errors.Join(err, c.releaseUnknown(ctx, req))
	}
	if err != nil || !out.OK {
		return nil, out, err
	}
	l, err := client.CompleteAcquire(req, out.Grant)
	return l, out, err
}

// releaseUnknown spends req, whose outcome is unknown, even after ctx
// ended, within cleanupTimeout (Executor.LeaseAbandon): the live lease it
// made is released, and where it made none it is recorded as spent, so
// that its first sending, if the database has yet to run it (queued
// behind the cancellation, on a connection the client already gave up),
// is refused as a late retry instead of granted to a waiter that left. A
// second sending of the request, as this once was, would be answered
// "held" while the first is still queued, which spends nothing. It returns
// nil when nothing is left held, or a *grantLeftError saying what may be;
// c then goes on trying in the background (retryAbandon).
func (c *Coordinator) releaseUnknown(ctx context.Context, req *AcquireRequest) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	members, err := c.abandon(rctx, req)
	if err != nil {
		return &grantLeftError{resource: req.name(), holder: req.Holder, requestID: req.RequestID, err: err,
			retrying: c.retryAbandon(req)}
	}
	for _, m := range members { // released: nil when nothing was
		c.waits.announced(sqlstore.LeaseChange{Resource: m})
	}
	return nil
}

// abandon runs Executor.LeaseAbandon for req in one of the acquisitions'
// and releases' slots, as the acquisition it cleans up after did, and
// returns the members it released.
func (c *Coordinator) abandon(ctx context.Context, req *AcquireRequest) ([]string, error) {
	members, err := checkMembers(req.Resource, req.Resources)
	if err != nil {
		return nil, err
	}
	free, err := c.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer free()
	p := sqlstore.LeaseAbandonParams{Resource: req.Resource, Holder: req.Holder, RequestID: req.RequestID, LockTimeout: c.lockTimeout}
	if claimsSet(members) {
		p.Members = members
	}
	res, err := c.store.Executor().LeaseAbandon(ctx, &p)
	if err != nil || !res.Released {
		return nil, err
	}
	return members, nil
}

// grantLeftError says that an acquisition whose outcome is unknown may have
// been granted, and that releasing it failed: the lease may stay held until
// its term ends, or until the release retried in the background succeeds.
type grantLeftError struct {
	resource, holder, requestID string
	err                         error
	retrying                    bool // retryAbandon goes on trying
}

func (e *grantLeftError) Error() string {
	left := "the lease may stay held until its term ends"
	if e.retrying {
		left += " (the release is retried in the background meanwhile)"
	}
	return fmt.Sprintf("fencegate: acquire %q: request %s may have been granted to %s, and releasing it failed: %s: %v",
		e.resource, e.requestID, e.holder, left, e.err)
}

func (e *grantLeftError) Unwrap() error { return e.err }

// leftGrant returns the *grantLeftError in err's chain, or nil.
func leftGrant(err error) error {
	if e, ok := errors.AsType[*grantLeftError](err); ok {
		return e
	}
	return nil
}

// waitEnded is AcquireWait's error once ctx ended: ctx's error, and who held
// the resource (read again, briefly, if this waiter never had its turn).
func (c *Coordinator) waitEnded(ctx context.Context, resource string, held *HeldError) error {
	cause := context.Cause(ctx)
	if held == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		st, err := c.Status(rctx, resource)
		if err != nil {
			return errors.Join(cause, err)
		}
		held = &HeldError{Resource: resource, HeldBy: st.Holder, Fence: st.Fence, RetryAfter: st.Remaining, Queued: !st.Held}
	}
	return errors.Join(cause, held)
}

func heldError(resource string, out AcquireOutcome) *HeldError {
	return &HeldError{Resource: resource, HeldBy: out.HeldBy, Fence: out.Fence, RetryAfter: out.RetryAfter, AlreadyHeld: out.AlreadyHeld}
}

// Waiters reads the resource's queue of waiting acquisitions
// (AcquireWait), first first. Advisory, as Status.
func (c *Coordinator) Waiters(ctx context.Context, resource string) ([]sqlstore.Waiter, error) {
	if err := fence.ValidateResource(resource); err != nil {
		return nil, err
	}
	ws, err := c.store.Executor().WaiterList(ctx, resource)
	if err != nil {
		return nil, c.wrap("list waiters of", resource, err)
	}
	return ws, nil
}

// waitRoom keeps a Coordinator's waiters, to wake the first of a resource
// when its lease changes, and the listening connection while there are any.
// The zero value is ready to use.
type waitRoom struct {
	mu         sync.Mutex
	byRes      map[string][]*waiter // sorted by place
	n          int
	stopListen context.CancelFunc
	closed     bool // Coordinator.Close: listen no more
	// linger stops the listener a while after the last waiter left
	// (leave), unless one joins first; lingerGen tells its firing from a
	// later one's.
	linger    *time.Timer
	lingerGen int

	hooks *waitHooks // tests only: set before the first wait
}

// waitHooks let tests see and steer a waitRoom. Every field may be nil.
type waitHooks struct {
	after       afterFunc                        // the fallback timer
	queued      func(resource string, seq int64) // a waiter joined
	listening   func()                           // a listener started and woke every waiter
	listenEnded func(err error)                  // a listener stopped
	notified    func(resource string)            // an announcement arrived (after its wake)
	poked       func(resource string, seq int64) // a waiter was woken
	woke        func()                           // a waiter's sleep ended by a wake
	noRetry     bool                             // never listen again after a failure
	linger      time.Duration                    // how long the listener outlives the last waiter, if not 0
}

// waiter is one AcquireWait call.
type waiter struct {
	resource string
	wake     chan struct{} // buffered: a wake during a look is kept

	mu         sync.Mutex
	seq        int64
	turn       bool              // an announcement named seq the first live waiter
	handed     bool              // an announcement said a hand-over granted seq
	handedRow  sqlstore.LeaseRow // the generation it carried, if Found
	releasedAt time.Time         // the last release that woke it, for the hand-over latency
}

// takeTurn reports, once, whether an announcement named w first since the
// last call.
func (w *waiter) takeTurn() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.turn
	w.turn = false
	return t
}

// takeHanded reports, once, whether an announcement said a hand-over
// granted w's place since the last call, and the generation it carried.
func (w *waiter) takeHanded() (bool, sqlstore.LeaseRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, row := w.handed, w.handedRow
	w.handed, w.handedRow = false, sqlstore.LeaseRow{}
	return h, row
}

func (w *waiter) place() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}

func (r *waitRoom) join(c *Coordinator, resource string, seq int64) *waiter {
	w := &waiter{resource: resource, seq: seq, wake: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.byRes == nil {
		r.byRes = make(map[string][]*waiter)
	}
	r.insertLocked(w)
	r.n++
	if r.linger != nil { // still listening since the last waiter left
		r.linger.Stop()
		r.linger = nil
	}
	if n := c.store; n.SupportsListener() && r.stopListen == nil && !r.closed {
		ctx, cancel := context.WithCancel(context.Background())
		r.stopListen = cancel
		go r.listen(ctx, n)
	}
	r.mu.Unlock()
	if r.hooks != nil && r.hooks.queued != nil {
		r.hooks.queued(resource, seq)
	}
	return w
}

// close stops the listener, now, and for good.
func (r *waitRoom) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.linger != nil {
		r.linger.Stop()
		r.linger = nil
	}
	if r.stopListen != nil {
		r.stopListen()
		r.stopListen = nil
	}
}

// has reports whether r has a waiter on resource.
func (r *waitRoom) has(resource string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byRes[resource]) > 0
}

func (r *waitRoom) insertLocked(w *waiter) {
	ws := r.byRes[w.resource]
	i, _ := slices.BinarySearchFunc(ws, w.seq, func(x *waiter, seq int64) int { return compareInt(x.seq, seq) })
	r.byRes[w.resource] = slices.Insert(ws, i, w)
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// move gives w a new place (it joined again at the back).
func (r *waitRoom) move(w *waiter, seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(w)
	w.mu.Lock()
	w.seq, w.turn, w.handed, w.handedRow = seq, false, false, sqlstore.LeaseRow{}
	w.mu.Unlock()
	r.insertLocked(w)
}

func (r *waitRoom) removeLocked(w *waiter) {
	ws := slices.DeleteFunc(r.byRes[w.resource], func(x *waiter) bool { return x == w })
	if len(ws) == 0 {
		delete(r.byRes, w.resource)
	} else {
		r.byRes[w.resource] = ws
	}
}

// listenLinger is the longest a Coordinator keeps listening after its last
// waiter left (a third of WaiterTTL if shorter). It is short because the
// listening connection is one of the pool's, busy while it lingers (closing
// the store ends it at once).
const listenLinger = time.Second

// leave takes w out, wakes the next waiter of its resource unless w was
// granted (the lease may be free and w was first; after a grant the next
// waiter would only find it held), and stops listening linger after no
// waiter is left, unless one joins first: participants that take turns (an
// election's, a semaphore's) would otherwise open a listening connection
// for each wait, and a release announced before it listens is missed (the
// waiter then looks only when it starts listening: the hand-over costs a
// new connection).
func (r *waitRoom) leave(w *waiter, granted bool, linger time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(w)
	r.n--
	if r.hooks != nil && r.hooks.linger != 0 {
		linger = r.hooks.linger
	}
	if r.n == 0 && r.stopListen != nil && r.linger == nil {
		r.lingerGen++
		gen := r.lingerGen
		r.linger = time.AfterFunc(linger, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.n == 0 && r.stopListen != nil && r.linger != nil && r.lingerGen == gen {
				r.stopListen()
				r.stopListen = nil
				r.linger = nil
			}
		})
	}
	if !granted {
		r.wakeLocked(w.resource)
	}
}

// wakeLocked wakes the first waiter of resource. Only the first can be
// granted, so waking the others would only cost them a look.
func (r *waitRoom) wakeLocked(resource string) {
	if ws := r.byRes[resource]; len(ws) > 0 {
		r.poke(ws[0])
	}
}

// announced wakes the waiter an announcement concerns: the one it names
// first, if that one is here (its turn is taken on trust once, see
// AcquireWait), or this process's first when it names none. Waking only the
// named one keeps a release from waking one waiter in every process.
func (r *waitRoom) announced(ch sqlstore.LeaseChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ch.First == 0 {
		if ws := r.byRes[ch.Resource]; len(ws) > 0 {
			ws[0].released(time.Now())
		}
		r.wakeLocked(ch.Resource)
		return
	}
	ws := r.byRes[ch.Resource]
	i, found := slices.BinarySearchFunc(ws, ch.First, func(x *waiter, seq int64) int { return compareInt(x.seq, seq) })
	if !found {
		return // not ours, or gone
	}
	w := ws[i]
	w.mu.Lock()
	if ch.Granted {
		w.handed, w.handedRow = true, ch.Lease
	} else {
		w.turn = true
	}
	w.releasedAt = time.Now()
	w.mu.Unlock()
	r.poke(w)
}

// wakeAll wakes every waiter: announcements may have been missed.
func (r *waitRoom) wakeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ws := range r.byRes {
		for _, w := range ws {
			r.poke(w)
		}
	}
}

func (r *waitRoom) poke(w *waiter) {
	if r.hooks != nil && r.hooks.poked != nil {
		r.hooks.poked(w.resource, w.seq)
	}
	select {
	case w.wake <- struct{}{}:
	default: // already due to look
	}
}

// sleep waits for a wake-up of w or d, and reports false if ctx ended.
func (r *waitRoom) sleep(ctx context.Context, w *waiter, d time.Duration) bool {
	var after afterFunc
	if r.hooks != nil {
		after = r.hooks.after
	}
	fired, stop := timer(after, d)
	defer stop()
	select {
	case <-ctx.Done():
		return false
	case <-w.wake:
		if r.hooks != nil && r.hooks.woke != nil {
			r.hooks.woke()
		}
	case <-fired:
	}
	return true
}

// listen keeps a listening connection until ctx ends, waking every waiter
// each time it starts listening (announcements before that were missed) and
// the first waiter of a resource at each announcement.
func (r *waitRoom) listen(ctx context.Context, n sqlstore.Store) {
	h := r.hooks
	if h == nil {
		h = &waitHooks{}
	}
	for {
		err := n.ListenLeases(ctx, func() {
			r.wakeAll()
			if h.listening != nil {
				h.listening()
			}
		}, func(ch sqlstore.LeaseChange) {
			r.announced(ch)
			if h.notified != nil {
				h.notified(ch.Resource)
			}
		})
		if h.listenEnded != nil {
			h.listenEnded(err)
		}
		if h.noRetry {
			return
		}
		t := time.NewTimer(listenRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Wait makes Hold wait its turn while the resource is held, as
// Coordinator.AcquireWait does, instead of returning a *HeldError at once:
// for at most max, or until Hold's context ends when max is 0. The limit is
// the wait's only; fn's work is not bounded by it. When it passes, Hold
// returns context.DeadlineExceeded joined with the *HeldError.
func Wait(max time.Duration) HoldOption {
	return func(o *holdOptions) { o.wait, o.maxWait = true, max }
}

// HoldOption changes how Hold acquires its lease.
type HoldOption func(*holdOptions)

type holdOptions struct {
	wait    bool
	maxWait time.Duration
}

// holdAcquire is Hold's acquisition: one try, or a wait with Wait.
func holdAcquire(ctx context.Context, c *Client, coord *Coordinator, members []string, opts []HoldOption) (*Lease, error) {
	var o holdOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.wait {
		if o.maxWait > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, o.maxWait)
			defer cancel()
		}
		return coord.acquireWait(ctx, c, members)
	}
	l, out, err := coord.tryAcquire(ctx, c, members, 0)
	if err == nil && l == nil {
		return nil, heldError(cmp.Or(out.HeldResource, members[0]), out)
	}
	return l, err
}
