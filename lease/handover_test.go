package lease

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// pgExecutor is a Postgres driver's Executor.
type pgExecutor = sqlstore.Executor

// countingStore counts the queue's statements a Postgres store runs outside
// an acquisition. It hides the store's announcements and pinned
// connections, so the only wake-ups are a Coordinator's own and its timers.
type countingStore struct {
	sqlstore.Store
	lists, touches, removes atomic.Int64
}

func (s *countingStore) Executor() sqlstore.Executor {
	return countingExecutor{s.Store.Executor(), s}
}

// OnConn runs fn on the wrapper's own Executor, MaxConns sets no bound and
// SupportsListener is false: the wrapper hides the store's pinned
// connections and its announcements.
func (s *countingStore) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *countingStore) MaxConns() int { return 0 }

func (s *countingStore) SupportsListener() bool { return false }

type countingExecutor struct {
	pgExecutor
	s *countingStore
}

func (e countingExecutor) WaiterList(ctx context.Context, resource string) ([]sqlstore.Waiter, error) {
	e.s.lists.Add(1)
	return e.pgExecutor.WaiterList(ctx, resource)
}

func (e countingExecutor) WaiterTouch(ctx context.Context, resource string, seq int64, ttl time.Duration) (int64, bool, error) {
	e.s.touches.Add(1)
	return e.pgExecutor.WaiterTouch(ctx, resource, seq, ttl)
}

func (e countingExecutor) WaiterRemove(ctx context.Context, seq int64) error {
	e.s.removes.Add(1)
	return e.pgExecutor.WaiterRemove(ctx, seq)
}

// queued reports whether place seq is in resource's queue.
func queued(t *testing.T, coord *Coordinator, resource string, seq int64) bool {
	t.Helper()
	ws, err := coord.Waiters(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ws, func(w sqlstore.Waiter) bool { return w.Seq == seq })
}

// TestGrantTakesTheWaitersPlace: an acquisition for a queued place that is
// granted (or answered as the retry of its own grant) takes the place out
// of the queue with the grant; one that is refused leaves it.
func TestGrantTakesTheWaitersPlace(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		ex := store.Executor()
		r := resourceName(t)
		a := newClient(t, "a", ClientOptions{})
		b := newClient(t, "b", ClientOptions{})
		place := func(res string) int64 {
			t.Helper()
			seq, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: res, Holder: "b", TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			return seq
		}
		request := func(res string) *AcquireRequest {
			t.Helper()
			req, err := b.BeginAcquire(res)
			if err != nil {
				t.Fatal(err)
			}
			return req
		}

		// A resource never leased (no lease row yet).
		fresh := r + "-fresh"
		seq := place(fresh)
		if out, err := coord.acquire(ctx, request(fresh), seq); err != nil || !out.OK {
			t.Fatalf("first acquisition = %+v, %v; want granted", out, err)
		}
		if queued(t, coord, fresh, seq) {
			t.Fatal("the first grant of a resource left its waiter's place in the queue")
		}

		// Held, then free.
		la := acquire(t, a, coord, r)
		seq = place(r)
		req := request(r)
		if out, err := coord.acquire(ctx, req, seq); err != nil || out.OK {
			t.Fatalf("acquire while held = %+v, %v; want held", out, err)
		}
		if !queued(t, coord, r, seq) {
			t.Fatal("a refused acquisition took its waiter's place out")
		}
		releaseOK(t, a, coord, la)
		if out, err := coord.acquire(ctx, req, seq); err != nil || !out.OK {
			t.Fatalf("acquire once free = %+v, %v; want granted", out, err)
		}
		if queued(t, coord, r, seq) {
			t.Fatal("the grant left its waiter's place in the queue")
		}

		// The same request again is answered with its grant (a retry).
		seq = place(r)
		if out, err := coord.acquire(ctx, req, seq); err != nil || !out.OK {
			t.Fatalf("retry = %+v, %v; want its grant", out, err)
		}
		if queued(t, coord, r, seq) {
			t.Fatal("a retry's answer left its waiter's place in the queue")
		}
	})
}

// TestReleaseNamesTheFirstWaiter: on Postgres a release reports the first
// live waiter of the resource (none: 0), and a stale one releases nothing.
func TestReleaseNamesTheFirstWaiter(t *testing.T) {
	forWaitStores(t, []string{"postgres-sql", "pgx-cache-statement"}, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		coord := NewCoordinator(store, nil)
		ex := store.Executor()
		r := resourceName(t)
		a := newClient(t, "a", ClientOptions{})
		release := func(l *Lease) (bool, int64) {
			t.Helper()
			tok := l.Token()
			res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{
				Resource: tok.Resource, Holder: tok.Holder, Fence: tok.Fence, NameFirstWaiter: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			return res.Released, res.FirstWaiter
		}

		if ok, first := release(acquire(t, a, coord, r)); !ok || first != 0 {
			t.Fatalf("release with nobody queued = %v, %d; want true, 0", ok, first)
		}
		la := acquire(t, a, coord, r)
		// A place that ran out (a microsecond) is not first, though earlier.
		if _, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: r, Holder: "gone", TTL: time.Microsecond}); err != nil {
			t.Fatal(err)
		}
		live, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: r, Holder: "b", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ex.WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: r, Holder: "c", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if ok, first := release(la); !ok || first != live {
			t.Fatalf("release = %v, %d; want true, the first live place %d", ok, first, live)
		}
		if ok, first := release(la); ok || first != 0 {
			t.Fatalf("stale release = %v, %d; want false, 0", ok, first)
		}
	})
}

// TestAcquireWaitHandOverRoundTrips: the waiter a release names goes
// straight to its acquisition (no touch), and its grant takes its place out
// (no removal after it); a second waiter of the same Coordinator queues
// without reading the queue.
func TestAcquireWaitHandOverRoundTrips(t *testing.T) {
	forWaitStores(t, []string{"postgres-sql", "pgx-cache-statement"}, nil, func(t *testing.T, pg sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		store := &countingStore{Store: pg}
		coord, rec := hookedCoordinator(store)
		r := resourceName(t)
		a := newClient(t, "a", ClientOptions{})
		la := acquire(t, a, coord, r)

		first := startWait(t, ctx, coord, newClient(t, "b", ClientOptions{}), r)
		rec.settle(t, store)
		second := startWait(t, ctx, coord, newClient(t, "c", ClientOptions{}), r)
		rec.settle(t, store)
		if n := store.lists.Load(); n != 1 {
			t.Errorf("the queue was read %d times; want once (the first waiter's)", n)
		}
		if n := store.touches.Load(); n != 2 {
			t.Fatalf("%d touches before the release; want each waiter's first look", n)
		}

		releaseOK(t, a, coord, la)
		res := <-first
		if res.err != nil || res.l.Token().Holder != "b" {
			t.Fatalf("first waiter: %v, %v", res.l, res.err)
		}
		if n := store.touches.Load(); n != 2 {
			t.Errorf("%d touches; want none after the release", n-2)
		}
		if n := store.removes.Load(); n != 0 {
			t.Errorf("%d removals after the grant; want none (the grant took the place out)", n)
		}
		ws, err := coord.Waiters(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || ws[0].Holder != "c" {
			t.Fatalf("queue after the grant: %+v; want the second waiter only", ws)
		}
		select {
		case res := <-second:
			t.Fatalf("second waiter returned while the lease is held: %v, %v", res.l, res.err)
		default:
		}
	})
}

// TestReleaseWakesNobodyBehindAnotherFirst: a release whose first waiter
// waits in another Coordinator wakes none of the releasing Coordinator's
// (they are behind it); the first one still gets the lease, here by its
// fallback timer (no announcements).
func TestReleaseWakesNobodyBehindAnotherFirst(t *testing.T) {
	forWaitStores(t, []string{"pgx-cache-statement"}, nil, func(t *testing.T, pg sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		store := &countingStore{Store: pg}
		coordA, recA := hookedCoordinator(store)
		coordB, recB := hookedCoordinator(store)
		r := resourceName(t)
		h := newClient(t, "h", ClientOptions{})
		lh := acquire(t, h, coordB, r)

		first := startWait(t, ctx, coordA, newClient(t, "a", ClientOptions{}), r)
		timerA := recA.settle(t, store)
		startWait(t, ctx, coordB, newClient(t, "b", ClientOptions{}), r)
		recB.settle(t, store)
		pokes := recB.pokesOf(r)

		releaseOK(t, h, coordB, lh)
		if got := recB.pokesOf(r); got != pokes {
			t.Fatalf("the release woke a waiter behind another Coordinator's first (%d wake-ups, %d before)", got, pokes)
		}
		timerA <- time.Now()
		if res := <-first; res.err != nil || res.l.Token().Holder != "a" {
			t.Fatalf("first waiter after its timer: %v, %v", res.l, res.err)
		}
	})
}
