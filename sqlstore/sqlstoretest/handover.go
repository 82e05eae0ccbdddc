package sqlstoretest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// handOverRules states Executor.LeaseHandOver: a holder's release that
// grants the resource to its first live waiter when that waiter takes
// hand-overs (WaiterAddParams.RequestID), dated from the waiter's last
// touch and ending at the earlier of that touch plus its term and its
// place's expiry; a plain release otherwise; nothing at all for a lease
// that is not the live (Resource, Holder, Fence), or when the caller's
// transaction rolls back.
func handOverRules(t *testing.T, e *env) {
	t.Run("granted to the first waiter", func(t *testing.T) {
		e := e.row(t, "granted")
		prior := e.given("a", "qa", minute)
		w := e.givenHandOverWaiter("b", "qb", minute, 30*time.Second)
		behind := e.givenHandOverWaiter("c", "qc", minute, 30*time.Second)
		var res sqlstore.LeaseHandOverResult
		err := e.do(func(ex sqlstore.Executor) error {
			// The holder's last fenced write, then the hand-over.
			if r, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: e.res, Holder: "a", Fence: prior.Fence, VerifyIssued: true}); err != nil || !r.Admitted {
				t.Errorf("the holder's write: FloorRaise = %+v, %v; want admitted", r, err)
			}
			var err error
			res, err = ex.LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{Resource: e.res, Holder: "a", Fence: prior.Fence})
			return err
		})
		if err != nil {
			t.Fatalf("LeaseHandOver: %v", err)
		}
		e.handedOver(prior, w, res, w.TouchedAt.Add(30*time.Second))
		if !e.queued(behind.Seq) {
			t.Errorf("the waiter behind the first, %d, left the queue", behind.Seq)
		}
		if f := e.requestFence("qc"); f != 0 {
			t.Errorf("the waiter behind the first was granted too: request qc has fence %d", f)
		}
		// The new holder's turn goes on as any holder's: another
		// acquisition is refused, and its release frees the resource.
		other, err := e.s.Executor().LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
			Resource: e.res, Holder: "c", RequestID: "qc2", TTL: minute, LockTimeout: time.Second,
		})
		if err != nil || other.Status != sqlstore.AcquireHeld || other.Lease.Holder != "b" {
			t.Errorf("another acquisition after the hand-over = %+v, %v; want held by b", other, err)
		}
		if !release(t, e.s.Executor(), e.res, "b", res.Lease.Fence) {
			t.Errorf("the handed-over lease %+v could not be released", res.Lease)
		}
	})

	t.Run("the first waiter takes no hand-over: released, the queue kept", func(t *testing.T) {
		e := e.row(t, "plain waiter")
		prior := e.given("a", "qa", minute)
		plain := e.givenHandOverWaiter("b", "", minute, 0)
		behind := e.givenHandOverWaiter("c", "qc", minute, 30*time.Second)
		e.released(prior, e.handOver("a", prior.Fence), prior.Fence, plain, behind)
	})

	t.Run("no waiter: released", func(t *testing.T) {
		e := e.row(t, "no waiter")
		prior := e.given("a", "qa", minute)
		e.released(prior, e.handOver("a", prior.Fence), prior.Fence)
	})

	t.Run("the floor above the next fence: released, the waiter kept", func(t *testing.T) {
		e := e.row(t, "floor ahead")
		prior := e.given("a", "qa", minute)
		w := e.givenHandOverWaiter("b", "qb", minute, 30*time.Second)
		floor := e.givenFloor()
		e.released(prior, e.handOver("a", prior.Fence), floor, w)
	})

	for _, r := range []struct {
		name   string
		given  func(e *env) sqlstore.LeaseRow
		holder string
		fence  func(prior sqlstore.LeaseRow) int64
	}{
		{
			name:   "another fence",
			given:  func(e *env) sqlstore.LeaseRow { return e.given("a", "qa", minute) },
			holder: "a", fence: func(p sqlstore.LeaseRow) int64 { return p.Fence + 1000 },
		},
		{
			name:   "another holder",
			given:  func(e *env) sqlstore.LeaseRow { return e.given("a", "qa", minute) },
			holder: "x", fence: func(p sqlstore.LeaseRow) int64 { return p.Fence },
		},
		{
			name:   "released already",
			given:  func(e *env) sqlstore.LeaseRow { return e.givenReleased("a", "qa") },
			holder: "a", fence: func(p sqlstore.LeaseRow) int64 { return p.Fence },
		},
		{
			name:   "expired",
			given:  func(e *env) sqlstore.LeaseRow { return e.givenExpired("a", "qa") },
			holder: "a", fence: func(p sqlstore.LeaseRow) int64 { return p.Fence },
		},
		{
			name:   "never leased",
			given:  func(e *env) sqlstore.LeaseRow { return sqlstore.LeaseRow{} },
			holder: "a", fence: func(sqlstore.LeaseRow) int64 { return 1 },
		},
	} {
		t.Run("not the live lease, "+r.name+": nothing written", func(t *testing.T) {
			e := e.row(t, "not live "+r.name)
			fence := r.fence(r.given(e))
			w := e.givenHandOverWaiter("b", "qb", minute, 30*time.Second)
			prior := e.snapshot()
			res := e.handOver(r.holder, fence)
			if res.Released || res.Waiter != 0 || res.Lease.Found {
				t.Errorf("LeaseHandOver = %+v, want nothing released", res)
			}
			e.unchanged(prior, w)
		})
	}

	t.Run("rolled back: nothing changed", func(t *testing.T) {
		e := e.row(t, "rolled back")
		prior := e.given("a", "qa", minute)
		w := e.givenHandOverWaiter("b", "qb", minute, 30*time.Second)
		errRollback := errors.New("the caller's transaction fails")
		err := e.txStore().InTx(ctx, func(ex sqlstore.Executor) error {
			res, err := ex.LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{Resource: e.res, Holder: "a", Fence: prior.Fence})
			if err != nil {
				return err
			}
			if !res.Released || res.Waiter != w.Seq {
				t.Errorf("LeaseHandOver in the transaction = %+v, want handed to %d", res, w.Seq)
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			t.Fatalf("InTx = %v, want the transaction's own error", err)
		}
		e.unchanged(prior, w)
		// The holder still holds under its fence, and the waiter's place
		// still takes a hand-over.
		if l, err := e.s.Executor().LeaseRenew(ctx, &sqlstore.LeaseRenewParams{Resource: e.res, Holder: "a", Fence: prior.Fence, TTL: minute}); err != nil || !l.Found || l.Fence != prior.Fence {
			t.Errorf("the holder's renewal after the rollback = %+v, %v; want renewed at fence %d", l, err, prior.Fence)
		}
		if res := e.handOver("a", prior.Fence); res.Waiter != w.Seq {
			t.Errorf("a hand-over after the rollback = %+v, want handed to %d", res, w.Seq)
		}
	})

	t.Run("the term shorter than the place's life: ends a term after the touch", func(t *testing.T) {
		e := e.row(t, "term shorter")
		prior := e.given("a", "qa", minute)
		w := e.givenHandOverWaiter("b", "qb", minute, 20*time.Second)
		e.handedOver(prior, w, e.handOver("a", prior.Fence), w.TouchedAt.Add(20*time.Second))
	})

	t.Run("the term longer than the place's life: ends with the place", func(t *testing.T) {
		e := e.row(t, "term longer")
		prior := e.given("a", "qa", minute)
		w := e.givenHandOverWaiter("b", "qb", minute, 5*minute)
		e.handedOver(prior, w, e.handOver("a", prior.Fence), w.ExpiresAt)
	})

	t.Run("dated from the last touch", func(t *testing.T) {
		e := e.row(t, "touched")
		prior := e.given("a", "qa", minute)
		added := e.givenHandOverWaiter("b", "qb", minute, 30*time.Second)
		e.clockPast(added.TouchedAt)
		first, kept, err := e.s.Executor().WaiterTouch(ctx, e.res, added.Seq, 2*minute)
		if err != nil || !kept || first != added.Seq {
			t.Fatalf("WaiterTouch = %d, %v, %v; want kept, first %d", first, kept, err, added.Seq)
		}
		w := e.waiter(added.Seq)
		if !w.TouchedAt.After(added.TouchedAt) || !w.ExpiresAt.Equal(w.TouchedAt.Add(2*minute)) {
			t.Errorf("after the touch the place is %+v (added %+v); want touched later, expiring 2m after the touch", w, added)
		}
		if w.RequestID != "qb" || w.Term != 30*time.Second {
			t.Errorf("the touch changed the place's request or term: %+v", w)
		}
		e.handedOver(prior, w, e.handOver("a", prior.Fence), w.TouchedAt.Add(30*time.Second))
	})
}

// txStore is the store whose transactions the env's mode runs the rules
// in: the shared steps' for Stepwise.
func (e *env) txStore() sqlstore.Store {
	if e.mode == "Stepwise" {
		return Stepwise(e.s)
	}
	return e.s
}

// clockPast reads the database's clock until it is past at (a tick or
// so: a millisecond on SQLite), so that the next statement's clock
// differs from at.
func (e *env) clockPast(at time.Time) {
	e.t.Helper()
	for range 1_000_000 {
		l, err := e.s.Executor().LeaseGet(ctx, e.res)
		if err != nil {
			e.t.Fatal(err)
		}
		if l.Now.After(at) {
			return
		}
	}
	e.t.Fatalf("the database's clock stays at %v", at)
}

// handOver runs LeaseHandOver of (the row's resource, holder, fence) by
// the env's mode.
func (e *env) handOver(holder string, fence int64) sqlstore.LeaseHandOverResult {
	e.t.Helper()
	var res sqlstore.LeaseHandOverResult
	err := e.do(func(ex sqlstore.Executor) error {
		var err error
		res, err = ex.LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{Resource: e.res, Holder: holder, Fence: fence})
		return err
	})
	if err != nil {
		e.t.Fatalf("LeaseHandOver(%s, %s, %d): %v", e.res, holder, fence, err)
	}
	return res
}

// givenHandOverWaiter queues a waiter on the row's resource (taking
// hand-overs when request is set) and returns its row as WaiterList reads
// it, checking what WaiterAdd recorded.
func (e *env) givenHandOverWaiter(holder, request string, ttl, term time.Duration) sqlstore.Waiter {
	e.t.Helper()
	seq, err := e.s.Executor().WaiterAdd(ctx, &sqlstore.WaiterAddParams{
		Resource: e.res, Holder: holder, TTL: ttl, RequestID: request, Term: term,
	})
	if err != nil {
		e.t.Fatalf("WaiterAdd(%s, %s): %v", holder, request, err)
	}
	w := e.waiter(seq)
	if w.Holder != holder || w.Resource != e.res || w.RequestID != request || w.Term != term {
		e.t.Errorf("WaiterAdd(%s, %s, term %v) queued %+v", holder, request, term, w)
	}
	// The expiry is ttl after the very clock reading recorded as the touch.
	if w.TouchedAt.IsZero() || !w.ExpiresAt.Equal(w.TouchedAt.Add(ttl)) {
		e.t.Errorf("WaiterAdd queued %+v: want touched_at set, and expiry %v after it", w, ttl)
	}
	return w
}

// waiter reads the live waiter at place seq, failing if it is not queued.
func (e *env) waiter(seq int64) sqlstore.Waiter {
	e.t.Helper()
	ws, err := e.s.Executor().WaiterList(ctx, e.res)
	if err != nil {
		e.t.Fatal(err)
	}
	i := slices.IndexFunc(ws, func(w sqlstore.Waiter) bool { return w.Seq == seq })
	if i < 0 {
		e.t.Fatalf("waiter %d is not queued: %+v", seq, ws)
	}
	return ws[i]
}

// handedOver checks a hand-over of prior's resource to the waiter w,
// whose first term ends at expires.
func (e *env) handedOver(prior sqlstore.LeaseRow, w sqlstore.Waiter, res sqlstore.LeaseHandOverResult, expires time.Time) {
	e.t.Helper()
	l := res.Lease
	if !res.Released || res.Waiter != w.Seq {
		e.t.Fatalf("LeaseHandOver = %+v, want released and handed to waiter %d", res, w.Seq)
	}
	if !l.Found || l.Resource != e.res || l.Holder != w.Holder || l.Fence <= prior.Fence || l.RequestID != w.RequestID ||
		!l.GrantedAt.Equal(w.TouchedAt) || !l.ExpiresAt.Equal(expires) || l.Released || !l.Live() {
		e.t.Errorf("handed over %+v; want %s's live lease under request %s, a fence above %d, granted at its touch %v, expiring at %v",
			l, w.Holder, w.RequestID, prior.Fence, w.TouchedAt, expires)
	}
	cur, err := e.lease()
	if err != nil {
		e.t.Fatal(err)
	}
	if cur.Holder != w.Holder || cur.Fence != l.Fence || cur.RequestID != w.RequestID ||
		!cur.GrantedAt.Equal(w.TouchedAt) || !cur.ExpiresAt.Equal(expires) || !cur.Live() {
		e.t.Errorf("the lease row after the hand-over is %+v, want %+v", cur, l)
	}
	if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != l.Fence || f.Holder != w.Holder {
		e.t.Errorf("the floor after the hand-over is %+v, want %d by %s", f, l.Fence, w.Holder)
	}
	if e.queued(w.Seq) {
		e.t.Errorf("the waiter handed the lease, %d, is still queued", w.Seq)
	}
	if _, kept, err := e.s.Executor().WaiterTouch(ctx, e.res, w.Seq, minute); err != nil || kept {
		e.t.Errorf("WaiterTouch of the handed-over place = kept %v, %v; want gone", kept, err)
	}
	if f := e.requestFence(w.RequestID); f != l.Fence {
		e.t.Errorf("RequestFence(%s) = %d, want the new fence %d", w.RequestID, f, l.Fence)
	}
	if f := e.requestFence(prior.RequestID); f != prior.Fence {
		e.t.Errorf("RequestFence(%s) of the old holder = %d, want %d", prior.RequestID, f, prior.Fence)
	}
	// The waiter's acquisition, sent again, is answered with its lease.
	again, err := e.s.Executor().LeaseAcquire(ctx, &sqlstore.LeaseAcquireParams{
		Resource: e.res, Holder: w.Holder, RequestID: w.RequestID, TTL: minute, LockTimeout: time.Second,
	})
	if err != nil || again.Status != sqlstore.AcquireRetried || again.Lease.Fence != l.Fence {
		e.t.Errorf("LeaseAcquire of the waiter's request = %+v, %v; want retried at fence %d", again, err, l.Fence)
	}
	// The old holder's fence is over.
	if release(e.t, e.s.Executor(), e.res, prior.Holder, prior.Fence) {
		e.t.Errorf("the old holder released the lease after handing it over")
	}
}

// released checks a hand-over that found no waiter to grant: prior's
// lease released as LeaseRelease releases it, the floor at floor, and the
// waiters ws queued as they were, their requests not recorded.
func (e *env) released(prior sqlstore.LeaseRow, res sqlstore.LeaseHandOverResult, floor int64, ws ...sqlstore.Waiter) {
	e.t.Helper()
	if !res.Released || res.Waiter != 0 || res.Lease.Found {
		e.t.Errorf("LeaseHandOver = %+v, want released, no waiter", res)
	}
	cur, err := e.lease()
	if err != nil {
		e.t.Fatal(err)
	}
	if cur.Live() || cur.Holder != prior.Holder || cur.Fence != prior.Fence || cur.RequestID != prior.RequestID {
		e.t.Errorf("the lease row after the release is %+v, want %+v released", cur, prior)
	}
	if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != floor {
		e.t.Errorf("the floor after the release is %+v, want %d", f, floor)
	}
	e.stillQueued(ws...)
}

// snapshot reads the row's lease row, Found false if there is none.
func (e *env) snapshot() sqlstore.LeaseRow {
	e.t.Helper()
	l, err := e.lease()
	if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
		e.t.Fatal(err)
	}
	return l
}

// unchanged checks that prior's lease row (none, if not Found), its floor
// and the waiters ws are as they were.
func (e *env) unchanged(prior sqlstore.LeaseRow, ws ...sqlstore.Waiter) {
	e.t.Helper()
	cur, err := e.lease()
	switch {
	case !prior.Found:
		if !errors.Is(err, sqlstore.ErrNotFound) {
			e.t.Errorf("a lease row appeared: %+v, %v", cur, err)
		}
		if f, err := e.s.Executor().FloorGet(ctx, e.res); !errors.Is(err, sqlstore.ErrNotFound) {
			e.t.Errorf("a floor appeared: %+v, %v", f, err)
		}
	case err != nil:
		e.t.Fatal(err)
	default:
		if cur.Holder != prior.Holder || cur.Fence != prior.Fence || cur.RequestID != prior.RequestID ||
			!cur.GrantedAt.Equal(prior.GrantedAt) || cur.Released != prior.Released {
			e.t.Errorf("the lease row is %+v, want %+v unchanged", cur, prior)
		}
		if prior.Live() && (!cur.Live() || !cur.ExpiresAt.Equal(prior.ExpiresAt)) {
			e.t.Errorf("the live lease is now %+v, want %+v unchanged", cur, prior)
		}
		if !prior.Live() && cur.Live() {
			e.t.Errorf("the lease over came back: %+v", cur)
		}
		if f := floorOf(e.t, e.s.Executor(), e.res); f.Floor != prior.Fence || f.Holder != prior.Holder {
			e.t.Errorf("the floor is %+v, want %d by %s", f, prior.Fence, prior.Holder)
		}
	}
	e.stillQueued(ws...)
}

// stillQueued checks that the waiters ws are queued as they were, their
// requests not recorded.
func (e *env) stillQueued(ws ...sqlstore.Waiter) {
	e.t.Helper()
	for _, w := range ws {
		if got := e.waiter(w.Seq); !got.TouchedAt.Equal(w.TouchedAt) || !got.ExpiresAt.Equal(w.ExpiresAt) || got.RequestID != w.RequestID {
			e.t.Errorf("waiter %d is now %+v, want %+v", w.Seq, got, w)
		}
		if w.RequestID != "" {
			if f := e.requestFence(w.RequestID); f != 0 {
				e.t.Errorf("the waiter's request %s was recorded (fence %d)", w.RequestID, f)
			}
		}
	}
}
