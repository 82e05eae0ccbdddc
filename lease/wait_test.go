package lease

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// waitDrivers are the drivers the waiting tests run on: SQLite, MySQL, and Postgres
// through database/sql and through pgx (one exec mode: waiting adds no
// statement shape the others do not cover).
var waitDrivers = []string{"sqlite", "postgres-sql", "pgx-cache-statement", "mysql"}

// forWaitStores runs fn on a fresh database of each of the named drivers, in
// parallel subtests. dsn, if not nil, changes the database's DSN before it
// is opened.
func forWaitStores(t *testing.T, names []string, dsn func(string) string, fn func(t *testing.T, store sqlstore.Store, query queryFunc)) {
	t.Helper()
	for _, name := range names {
		d := dbtest.Find(t, name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url := d.DSN(t)
			if dsn != nil {
				url = dsn(url)
			}
			if d.SQL != nil {
				h := d.SQL(t, url)
				fn(t, h.Driver, h.QueryRow)
			} else {
				h := d.Pgx(t, url)
				fn(t, h.Driver, h.QueryRow)
			}
		})
	}
}

// queryFunc reads one row on a connection of the test's own.
type queryFunc = func(ctx context.Context, query string, args ...any) dbtest.Row

// recorder collects what a waitRoom's hooks report, as channels a test
// waits on, and fakes the fallback timers: none fires unless the test fires
// it.
type recorder struct {
	queued    chan int64
	armed     chan chan time.Time
	listening chan struct{}
	ended     chan error
	notified  chan string
	woke      chan struct{}

	mu      sync.Mutex
	pokes   map[string]int
	bySeq   map[int64]int          // wake-ups of each place
	wakes   int                    // sleeps ended by a wake-up, counted before woke hears of one
	armedAt map[chan time.Time]int // each fake timer: wakes when it was armed
}

func newRecorder() *recorder {
	return &recorder{
		queued:    make(chan int64, 100),
		armed:     make(chan chan time.Time, 1000),
		listening: make(chan struct{}, 100),
		ended:     make(chan error, 100),
		notified:  make(chan string, 1000),
		woke:      make(chan struct{}, 1000),
		pokes:     map[string]int{},
		bySeq:     map[int64]int{},
		armedAt:   map[chan time.Time]int{},
	}
}

// hooks returns the recorder's hooks; with fakeTimers, the fallback timers
// are the recorder's.
func (r *recorder) hooks(fakeTimers bool) *waitHooks {
	h := &waitHooks{
		queued:      func(_ string, seq int64) { r.queued <- seq },
		listening:   func() { r.listening <- struct{}{} },
		listenEnded: func(err error) { r.ended <- err },
		notified:    func(res string) { r.notified <- res },
		woke: func() {
			r.mu.Lock()
			r.wakes++
			r.mu.Unlock()
			r.woke <- struct{}{}
		},
		poked: func(res string, seq int64) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.pokes[res]++
			r.bySeq[seq]++
		},
	}
	if fakeTimers {
		h.after = func(time.Duration) (<-chan time.Time, func() bool) {
			ch := make(chan time.Time, 1)
			r.mu.Lock()
			r.armedAt[ch] = r.wakes
			r.mu.Unlock()
			r.armed <- ch
			return ch, func() bool { return true }
		}
	}
	return h
}

func (r *recorder) pokesOfPlace(seq int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bySeq[seq]
}

func (r *recorder) pokesOf(res string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pokes[res]
}

// settle waits until a waiter on coord sleeps on a fallback timer with no
// wake-up pending: on Postgres, after its listener started and the wake-up
// it sent every waiter was taken, on the first timer armed after that. It
// returns that timer, which the waiter sleeps on. The waiter must be the
// only one of coord's that arms timers meanwhile.
func (r *recorder) settle(t *testing.T, store sqlstore.Store) chan time.Time {
	t.Helper()
	timer, _ := r.settlePlace(t, store)
	return timer
}

// settlePlace is settle, returning the waiter's place too.
func (r *recorder) settlePlace(t *testing.T, store sqlstore.Store) (chan time.Time, int64) {
	t.Helper()
	seq := recv(t, r.queued, "waiter joining the queue")
	if !store.SupportsListener() {
		return recv(t, r.armed, "fallback timer armed by the waiter"), seq
	}
	recv(t, r.listening, "listener ready")
	recv(t, r.woke, "wake-up of the waiter by the listener's start")
	// The waiter sleeps on the first timer it armed after that wake-up.
	// Timers are told apart by when they were armed, not by which are
	// queued when the test looks: by then the waiter may have gone round
	// its loop and armed the one it sleeps on too.
	woken := r.wakeCount()
	for {
		timer := recv(t, r.armed, "fallback timer armed after the wake-up")
		if r.wakesBefore(timer) >= woken {
			return timer, seq
		}
	}
}

func (r *recorder) wakeCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wakes
}

// wakesBefore is how many sleeps a wake-up had ended when timer was armed.
func (r *recorder) wakesBefore(timer chan time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.armedAt[timer]
}

// recvTimeout bounds a test's wait for something a waiter, a listener or
// the database is expected to do. It is no synchronisation (recv returns as
// soon as the value arrives), only a way to fail with a message rather than
// hang the package: generous, so that a loaded machine never reaches it.
const recvTimeout = 30 * time.Second

// recv receives from ch, or fails the test saying what did not come within
// recvTimeout.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	timeout := time.NewTimer(recvTimeout)
	defer timeout.Stop()
	select {
	case v := <-ch:
		return v
	case <-timeout.C:
		t.Fatalf("no %s within %v", what, recvTimeout)
		panic("unreachable")
	}
}

// resourceName returns a resource name no other test uses: Postgres
// announces lease changes to the whole database, every schema.
func resourceName(t *testing.T) string { return "r-" + newRequestID()[:12] }

// hookedCoordinator returns a coordinator over store whose waiters are seen
// by a recorder, whose fallback timers fire only when the test fires them,
// and whose waiters never lose their place by time (an hour's WaiterTTL).
func hookedCoordinator(store sqlstore.Store) (*Coordinator, *recorder) {
	coord := NewCoordinator(store, &CoordinatorOptions{WaiterTTL: time.Hour})
	rec := newRecorder()
	coord.waits.hooks = rec.hooks(true)
	return coord, rec
}

type waitResult struct {
	l   *Lease
	err error
}

// startWait runs AcquireWait in a goroutine, cancelled when the test ends.
func startWait(t *testing.T, ctx context.Context, coord *Coordinator, c *Client, res string) <-chan waitResult {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	done := make(chan waitResult, 1)
	go func() {
		l, err := coord.AcquireWait(ctx, c, res)
		done <- waitResult{l, err}
	}()
	return done
}

// awaited queues a waiter row (no process behind it) on resource, so that
// its release is announced: a release nobody waits for is not.
func awaited(t *testing.T, store sqlstore.Store, resource string) {
	t.Helper()
	if _, err := store.Executor().WaiterAdd(context.Background(), &sqlstore.WaiterAddParams{Resource: resource, Holder: "awaiting", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
}

func releaseOK(t *testing.T, c *Client, coord *Coordinator, l *Lease) {
	t.Helper()
	token, err := c.Release(l)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := coord.Release(context.Background(), token); err != nil || !ok {
		t.Fatalf("Release(%v) = %v, %v", token, ok, err)
	}
}

// TestAcquireWaitKeepsArrivalOrder queues 16 waiters one after another, on
// two coordinators (two processes, as far as waking goes), and checks they
// are granted in the order they queued.
func TestAcquireWaitKeepsArrivalOrder(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		// On SQLite the other coordinator's waiters learn of a release by
		// their timers (every WaiterTTL/3); the default WaiterTTL is long
		// enough that no waiter loses its place while a loaded machine makes
		// it wait for SQLite's write lock (a shorter one did, under -race).
		opts := &CoordinatorOptions{}
		coords := []*Coordinator{NewCoordinator(store, opts), NewCoordinator(store, opts)}
		recs := []*recorder{newRecorder(), newRecorder()}
		for i, coord := range coords {
			coord.waits.hooks = recs[i].hooks(false)
		}
		holder := newClient(t, "holder", ClientOptions{})
		first := acquire(t, holder, coords[0], r)

		const n = 16
		var mu sync.Mutex
		var order []int
		results := make([]<-chan waitResult, n)
		for i := range n {
			coord, rec := coords[i%2], recs[i%2]
			c := newClient(t, fmt.Sprintf("w%02d", i), ClientOptions{})
			done := make(chan waitResult, 1)
			results[i] = done
			wctx, cancel := context.WithCancel(ctx)
			t.Cleanup(cancel)
			go func() {
				l, err := coord.AcquireWait(wctx, c, r)
				if err == nil {
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					token, _ := c.Release(l)
					_, err = coord.Release(ctx, token)
				}
				done <- waitResult{l, err}
			}()
			recv(t, rec.queued, fmt.Sprintf("queueing of waiter %d", i)) // the next one queues after this one
		}
		releaseOK(t, holder, coords[0], first)
		for i, done := range results {
			if res := recv(t, done, fmt.Sprintf("grant to waiter %d", i)); res.err != nil {
				t.Fatalf("waiter %d: %v", i, res.err)
			}
		}
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; !slices.Equal(order, want) {
			t.Fatalf("granted in order %v, want %v", order, want)
		}
		if ws, err := coords[0].Waiters(ctx, r); err != nil || len(ws) != 0 {
			t.Fatalf("Waiters after every grant = %v, %v; want none", ws, err)
		}
	})
}

// TestAcquireWaitCancelledLeavesNoTrace cancels the first of two waiters:
// its place is gone when AcquireWait returns, and the second is granted at
// the release, not when the first's place would have run out (an hour).
func TestAcquireWaitCancelledLeavesNoTrace(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coord, rec := hookedCoordinator(store) // no timer fires: only wake-ups hand over
		holder := newClient(t, "holder", ClientOptions{})
		l := acquire(t, holder, coord, r)

		cctx, cancel := context.WithCancel(ctx)
		firstDone := startWait(t, cctx, coord, newClient(t, "first", ClientOptions{}), r)
		recv(t, rec.queued, "queueing of the first waiter")
		secondDone := startWait(t, ctx, coord, newClient(t, "second", ClientOptions{}), r)
		second := recv(t, rec.queued, "queueing of the second waiter")

		cancel()
		res := recv(t, firstDone, "return of the cancelled waiter")
		if !errors.Is(res.err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v, want context.Canceled", res.err)
		}
		held, ok := errors.AsType[*HeldError](res.err)
		if !ok || held.HeldBy != "holder" {
			t.Fatalf("cancelled waiter's error %v does not say who holds the lock", res.err)
		}
		ws, err := coord.Waiters(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) != 1 || ws[0].Seq != second || ws[0].Holder != "second" {
			t.Fatalf("queue after the cancel = %+v, want only the second waiter (place %d)", ws, second)
		}

		releaseOK(t, holder, coord, l)
		res = recv(t, secondDone, "grant to the second waiter")
		if res.err != nil {
			t.Fatalf("second waiter: %v", res.err)
		}
		if res.l.Token().Holder != "second" {
			t.Fatalf("granted to %v", res.l.Token())
		}
		if ws, err := coord.Waiters(ctx, r); err != nil || len(ws) != 0 {
			t.Fatalf("Waiters after the grant = %v, %v; want none", ws, err)
		}
	})
}

// TestAcquireWaitStaleReleaseWakesNobody releases with a stale token while a
// waiter waits for the current holder: nothing is announced, nobody is
// woken, and the waiter is granted only at the real release.
func TestAcquireWaitStaleReleaseWakesNobody(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coord, rec := hookedCoordinator(store)
		a := newClient(t, "a", ClientOptions{})
		b := newClient(t, "b", ClientOptions{})
		la := acquire(t, a, coord, r)
		staleToken, _ := a.Release(la)
		if ok, err := coord.Release(ctx, staleToken); err != nil || !ok {
			t.Fatalf("Release = %v, %v", ok, err)
		}
		lb := acquire(t, b, coord, r)

		done := startWait(t, ctx, coord, newClient(t, "c", ClientOptions{}), r)
		rec.settle(t, store)
		pokes := rec.pokesOf(r)

		for _, stale := range []fence.Token{staleToken, {Resource: r, Holder: "a", Fence: lb.Token().Fence}} {
			if ok, err := coord.Release(ctx, stale); err != nil || ok {
				t.Fatalf("Release(stale %v) = %v, %v; want false", stale, ok, err)
			}
		}
		if store.SupportsListener() {
			// Announcements arrive in commit order: once one made after the
			// stale releases is here, any they made would be too.
			d := newClient(t, "d", ClientOptions{})
			awaited(t, store, r+"-other")
			releaseOK(t, d, coord, acquire(t, d, coord, r+"-other"))
			for {
				res := recv(t, rec.notified, "announcement of the other resource's release")
				if res == r+"-other" {
					break
				}
				if res == r {
					t.Fatal("a stale release was announced")
				}
			}
		}
		if got := rec.pokesOf(r); got != pokes {
			t.Fatalf("a stale release woke a waiter (%d wake-ups, %d before)", got, pokes)
		}
		select {
		case res := <-done:
			t.Fatalf("waiter returned after a stale release: %v, %v", res.l, res.err)
		default:
		}

		releaseOK(t, b, coord, lb)
		if res := recv(t, done, "grant after the real release"); res.err != nil || res.l.Token().Holder != "c" {
			t.Fatalf("waiter after the real release: %v, %v", res.l, res.err)
		}
	})
}

// TestAcquireWaitReleaseWakesOnlyTheFirst queues four waiters on three
// coordinators (two on the first) and releases: only the first waiter is
// woken. The other coordinators' first waiters are not (on Postgres the
// announcement names the first waiter of the whole queue), and neither is
// the next waiter when the first leaves the queue granted (it would only
// find the lock held).
func TestAcquireWaitReleaseWakesOnlyTheFirst(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coords := make([]*Coordinator, 3)
		recs := make([]*recorder, 3)
		for i := range coords {
			coords[i], recs[i] = hookedCoordinator(store)
		}
		holder := newClient(t, "holder", ClientOptions{})
		l := acquire(t, holder, coords[0], r)

		// w0 and w1 on coords[0], w2 on coords[1], w3 on coords[2].
		w0 := startWait(t, ctx, coords[0], newClient(t, "w0", ClientOptions{}), r)
		recs[0].settle(t, store)
		startWait(t, ctx, coords[0], newClient(t, "w1", ClientOptions{}), r)
		w1 := recv(t, recs[0].queued, "queueing of w1")
		recv(t, recs[0].armed, "timer of w1") // w1 sleeps: it is not first
		var others []int64
		for i, name := range []string{"w2", "w3"} {
			rec := recs[i+1]
			startWait(t, ctx, coords[i+1], newClient(t, name, ClientOptions{}), r)
			_, seq := rec.settlePlace(t, store)
			others = append(others, seq)
		}
		before := map[int64]int{w1: recs[0].pokesOfPlace(w1), others[0]: recs[1].pokesOfPlace(others[0]), others[1]: recs[2].pokesOfPlace(others[1])}

		releaseOK(t, holder, coords[0], l)
		if res := recv(t, w0, "grant to w0"); res.err != nil || res.l.Token().Holder != "w0" {
			t.Fatalf("first waiter after the release: %v, %v", res.l, res.err)
		}
		if store.SupportsListener() {
			// Announcements arrive in commit order: once one made after the
			// grant (and w0's leaving) is at every coordinator, any wake-up
			// the release or the grant caused has happened.
			marker := r + "-marker"
			awaited(t, store, marker)
			d := newClient(t, "d", ClientOptions{})
			releaseOK(t, d, coords[0], acquire(t, d, coords[0], marker))
			for _, rec := range recs {
				for recv(t, rec.notified, "announcement of the marker's release") != marker {
					// an earlier announcement (the release of r)
				}
			}
		}
		after := map[int64]int{w1: recs[0].pokesOfPlace(w1), others[0]: recs[1].pokesOfPlace(others[0]), others[1]: recs[2].pokesOfPlace(others[1])}
		if !maps.Equal(before, after) {
			t.Fatalf("wake-ups of the waiters behind the first, by place: %v before the release, %v after; want none", before, after)
		}
	})
}

// TestAcquireWaitLostNotification cuts the waiting coordinator's listening
// connection (and never lets it listen again), then releases the lock from
// another coordinator: no announcement and no wake-up reach the waiter, and
// its fallback timer (a fake one the test fires) still hands the lock over.
func TestAcquireWaitLostNotification(t *testing.T) {
	// Each subtest's connections carry a name of their own, so that one
	// subtest never cuts the other's listener.
	withApp := func(url string) string { return url + "&application_name=fgwait_" + newRequestID()[:12] }
	// Announcements are Postgres's; elsewhere every hand-over between
	// coordinators is the fallback's (TestAcquireWaitKeepsArrivalOrder).
	forWaitStores(t, []string{"postgres-sql", "pgx-cache-statement"}, withApp, func(t *testing.T, store sqlstore.Store, query queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		holderCoord := NewCoordinator(store, nil)
		coord, rec := hookedCoordinator(store)
		coord.waits.hooks.noRetry = true
		holder := newClient(t, "holder", ClientOptions{})
		l := acquire(t, holder, holderCoord, r)

		done := startWait(t, ctx, coord, newClient(t, "waiter", ClientOptions{}), r)
		sleepingOn := rec.settle(t, store)

		// The listening connection is the one of this subtest's application
		// at its LISTEN; pg_terminate_backend waits until it is gone. The
		// listener may still be on its way to its LISTEN (or back to it), so
		// the cut is tried until it finds one, within recvTimeout.
		var app string
		if err := query(ctx, `SELECT current_setting('application_name')`).Scan(&app); err != nil {
			t.Fatal(err)
		}
		// A listener that ended on its own before the cut (noRetry: it never
		// listens again) leaves the waiter as deaf as a cut one: its end is
		// taken as the cut.
		var ended error
	cutting:
		for deadline := time.Now().Add(recvTimeout); ; time.Sleep(20 * time.Millisecond) {
			var cut int
			err := query(ctx, `
SELECT count(*) FROM pg_stat_activity
 WHERE application_name = $1 AND query LIKE 'LISTEN %' AND pg_terminate_backend(pid, 10000)`, app).Scan(&cut)
			switch {
			case err != nil || cut > 1:
				t.Fatalf("cut %d listening connections (%v), want 1", cut, err)
			case cut == 1:
				ended = recv(t, rec.ended, "end of the cut listener")
				break cutting
			}
			select {
			case ended = <-rec.ended:
				t.Logf("the listener had ended before the cut: %v", ended)
				break cutting
			default:
			}
			if time.Now().After(deadline) {
				var seen string // what this subtest's connections were doing, to tell why
				_ = query(ctx, `SELECT coalesce(string_agg(state || ': ' || left(query, 60), E'\n'), '')
  FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&seen)
				t.Fatalf("no listening connection of %s to cut within %v, and the listener did not end; its connections:\n%s", app, recvTimeout, seen)
			}
		}
		if ended == nil {
			t.Fatal("listener ended without an error")
		}
		pokes := rec.pokesOf(r)

		releaseOK(t, holder, holderCoord, l)
		sleepingOn <- time.Now() // the fallback: the holder's expiry, as far as the waiter knows
		for {
			timeout := time.NewTimer(recvTimeout)
			select {
			case timer := <-rec.armed:
				timeout.Stop()
				timer <- time.Now()
				continue
			case res := <-done:
				timeout.Stop()
				if res.err != nil || res.l.Token().Holder != "waiter" {
					t.Fatalf("waiter after the release: %v, %v", res.l, res.err)
				}
			case <-timeout.C:
				t.Fatalf("neither a grant nor a new timer within %v of the fallback firing", recvTimeout)
			}
			break
		}
		if got := rec.pokesOf(r); got != pokes {
			t.Fatalf("the waiter was woken (%d wake-ups, %d before the cut): the test did not cut the announcements", got, pokes)
		}
	})
}

// TestHoldWaitRunsAfterTheRelease: Hold with Wait queues behind the holder
// and runs fn once the lock is released; with a limit that passes first, it
// says who holds the lock.
func TestHoldWaitRunsAfterTheRelease(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coord, rec := hookedCoordinator(store)
		holder := newClient(t, "holder", ClientOptions{})
		l := acquire(t, holder, coord, r)

		waiter := newClient(t, "waiter", ClientOptions{})
		short, cancel := context.WithCancel(ctx)
		cancel() // the limit has passed
		err := Hold(short, waiter, coord, r, func(context.Context, *Lease) error {
			t.Error("fn ran while the lock was held")
			return nil
		}, Wait(time.Hour))
		if held, ok := errors.AsType[*HeldError](err); !ok || held.HeldBy != "holder" || !errors.Is(err, context.Canceled) {
			t.Fatalf("Hold past its wait = %v, want context.Canceled and who holds the lock", err)
		}

		ran := make(chan fence.Token, 1)
		done := make(chan error, 1)
		go func() {
			done <- Hold(ctx, waiter, coord, r, func(_ context.Context, l *Lease) error {
				ran <- l.Token()
				return nil
			}, Wait(0))
		}()
		recv(t, rec.queued, "queueing of the waiter")
		releaseOK(t, holder, coord, l)
		if err := recv(t, done, "Hold's return"); err != nil {
			t.Fatal(err)
		}
		if tok := recv(t, ran, "run of fn"); tok.Holder != "waiter" || tok.Fence <= l.Token().Fence {
			t.Fatalf("fn ran with %v after %v", tok, l.Token())
		}
	})
}

// removeFailingStore is a store whose queue removals fail.
type removeFailingStore struct{ sqlstore.Store }

var errRemoveFailed = errors.New("remove failed (test)")

func (s removeFailingStore) Executor() sqlstore.Executor {
	return removeFailingExecutor{s.Store.Executor()}
}

// OnConn runs fn on the wrapper's own Executor, MaxConns sets no bound and
// SupportsListener is false: the wrapper hides the store's pinned
// connections and its announcements.
func (s removeFailingStore) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s removeFailingStore) MaxConns() int { return 0 }

func (s removeFailingStore) SupportsListener() bool { return false }

type removeFailingExecutor struct{ sqlstore.Executor }

func (removeFailingExecutor) WaiterRemove(context.Context, int64) error { return errRemoveFailed }

// TestAcquireWaitSaysWhenItsPlaceStays: a cancelled waiter whose place
// could not be taken out of the queue says so, beside ctx's error.
func TestAcquireWaitSaysWhenItsPlaceStays(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		r := resourceName(t)
		coord, rec := hookedCoordinator(removeFailingStore{store})
		holder := newClient(t, "holder", ClientOptions{})
		acquire(t, holder, coord, r)

		ctx, cancel := context.WithCancel(context.Background())
		done := startWait(t, ctx, coord, newClient(t, "waiter", ClientOptions{}), r)
		seq := recv(t, rec.queued, "queueing of the waiter")
		cancel()
		res := recv(t, done, "return of the cancelled waiter")
		if !errors.Is(res.err, context.Canceled) || !errors.Is(res.err, errRemoveFailed) {
			t.Fatalf("cancelled waiter: %v, want context.Canceled and the removal's error", res.err)
		}
		if want := fmt.Sprintf("place %d stays until it runs out", seq); !strings.Contains(res.err.Error(), want) {
			t.Fatalf("cancelled waiter's error %q does not say %q", res.err, want)
		}
		if !queued(t, coord, r, seq) {
			t.Fatalf("place %d is not in the queue, though its removal failed", seq)
		}
	})
}

// lostGrantReply is a store whose next grant of resource to holder, once
// armed, commits and then loses its reply as a cancelled call does: the
// caller's ctx is cancelled and the call returns context.Canceled. It hides
// the store's announcements and pinned connections (the Coordinator's own
// wakes and timers only).
type lostGrantReply struct {
	sqlstore.Store
	resource, holder string
	failRelease      bool // releases fail

	mu     sync.Mutex
	cancel context.CancelFunc // armed: the next grant's reply is lost
	lost   int                // replies lost
}

var errReleaseFailed = errors.New("release failed (test)")

func (s *lostGrantReply) arm(cancel context.CancelFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cancel = cancel
}

// loseReply cancels the armed ctx, once, and reports whether it did.
func (s *lostGrantReply) loseReply() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return false
	}
	s.cancel()
	s.cancel = nil
	s.lost++
	return true
}

func (s *lostGrantReply) Executor() sqlstore.Executor {
	return lostReplyExecutor{s.Store.Executor(), s}
}

// OnConn runs fn on the wrapper's own Executor, MaxConns sets no bound and
// SupportsListener is false: the wrapper hides the store's pinned
// connections and its announcements.
func (s *lostGrantReply) OnConn(_ context.Context, fn func(sqlstore.Executor) error) error {
	return fn(s.Executor())
}

func (s *lostGrantReply) MaxConns() int { return 0 }

func (s *lostGrantReply) SupportsListener() bool { return false }

type lostReplyExecutor struct {
	sqlstore.Executor
	s *lostGrantReply
}

func (e lostReplyExecutor) LeaseRelease(ctx context.Context, p *sqlstore.LeaseReleaseParams) (sqlstore.LeaseReleaseResult, error) {
	if e.s.releasesFail() {
		return sqlstore.LeaseReleaseResult{}, errReleaseFailed
	}
	return e.Executor.LeaseRelease(ctx, p)
}

// LeaseAbandon, the waiter's cleanup of a grant it never learned of, fails
// as a release does.
func (e lostReplyExecutor) LeaseAbandon(ctx context.Context, p *sqlstore.LeaseAbandonParams) (sqlstore.LeaseAbandonResult, error) {
	if e.s.releasesFail() {
		return sqlstore.LeaseAbandonResult{}, errReleaseFailed
	}
	return e.Executor.LeaseAbandon(ctx, p)
}

func (s *lostGrantReply) releasesFail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failRelease
}

func (e lostReplyExecutor) LeaseAcquire(ctx context.Context, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	res, err := e.Executor.LeaseAcquire(ctx, p)
	if err != nil || res.Status != sqlstore.AcquireGranted || res.Lease.Holder != e.s.holder || !e.s.loseReply() {
		return res, err
	}
	return sqlstore.LeaseAcquireResult{}, context.Canceled
}

// TestAcquireWaitReleasesAGrantWhoseReplyWasLost: a waiter whose grant
// committed, but whose reply was lost as its ctx ended, returns ctx's error
// and leaves the resource free: it released the grant it could not return,
// which nobody else could have released. When that release fails, the
// error says the lease may stay held.
func TestAcquireWaitReleasesAGrantWhoseReplyWasLost(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, inner sqlstore.Store, _ queryFunc) {
		testLostGrantReply(t, &lostGrantReply{Store: inner, resource: resourceName(t), holder: "waiter"})
	})
}

func TestAcquireWaitSaysWhenALostGrantStaysHeld(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, inner sqlstore.Store, _ queryFunc) {
		testLostGrantReply(t, &lostGrantReply{Store: inner, resource: resourceName(t), holder: "waiter", failRelease: true})
	})
}

func testLostGrantReply(t *testing.T, store *lostGrantReply) {
	r := store.resource
	coord, rec := hookedCoordinator(store)
	holder := newClient(t, "holder", ClientOptions{TTL: time.Minute})
	l := acquire(t, holder, coord, r)
	token, _ := holder.Release(l)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := startWait(t, ctx, coord, newClient(t, "waiter", ClientOptions{TTL: time.Minute}), r)
	recv(t, rec.queued, "queueing of the waiter")
	store.arm(cancel)
	// The holder's release, past the wrapper (whose releases may be set
	// to fail), and the wake a release here makes: the waiter's grant
	// follows, and its reply is lost.
	if res, err := store.Store.Executor().LeaseRelease(context.Background(), &sqlstore.LeaseReleaseParams{
		Resource: token.Resource, Holder: token.Holder, Fence: token.Fence,
	}); err != nil || !res.Released {
		t.Fatalf("release = %+v, %v", res, err)
	}
	coord.waits.announced(sqlstore.LeaseChange{Resource: r})
	res := recv(t, done, "return of the waiter")
	if res.l != nil || !errors.Is(res.err, context.Canceled) {
		t.Fatalf("AcquireWait = %v, %v; want context.Canceled", res.l, res.err)
	}
	if store.lost != 1 {
		t.Fatalf("%d replies lost, want 1", store.lost)
	}
	st, err := coord.Status(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder != "waiter" || st.Fence <= l.Token().Fence {
		t.Fatalf("after the lost reply: %+v; want the waiter's grant", st)
	}
	if store.failRelease {
		if !st.Held || !errors.Is(res.err, errReleaseFailed) || !strings.Contains(res.err.Error(), "may stay held until its term ends") {
			t.Fatalf("release failed; AcquireWait = %v, lease %+v; want the release's error, saying the lease may stay held", res.err, st)
		}
		return
	}
	if st.Held {
		t.Fatalf("after the lost reply: %+v; want the waiter's grant released", st)
	}
}

// TestHoldReleasesAGrantWhoseReplyWasLost: Hold without Wait, whose first
// and only acquisition committed with its reply lost as its ctx ended,
// returns ctx's error without running fn, and leaves the resource free.
func TestHoldReleasesAGrantWhoseReplyWasLost(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, inner sqlstore.Store, _ queryFunc) {
		store := &lostGrantReply{Store: inner, resource: resourceName(t), holder: "waiter"}
		coord := NewCoordinator(store, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		store.arm(cancel)
		err := Hold(ctx, newClient(t, "waiter", ClientOptions{TTL: time.Minute}), coord, store.resource, func(context.Context, *Lease) error {
			t.Error("fn ran without a lease the holder was told of")
			return nil
		})
		if !errors.Is(err, context.Canceled) || store.lost != 1 {
			t.Fatalf("Hold = %v after %d lost replies; want context.Canceled after 1", err, store.lost)
		}
		st, err := coord.Status(context.Background(), store.resource)
		if err != nil || st.Held || st.Holder != "waiter" {
			t.Fatalf("after the lost reply: %+v, %v; want the grant, released", st, err)
		}
	})
}

// TryAcquire grants a free resource at once and answers a held one with a
// *HeldError naming its holder, the caller's own lease with AlreadyHeld;
// the lease's Age counts from the grant's request on the holder's clock.
func TestTryAcquire(t *testing.T) {
	ctx := context.Background()
	coord := NewCoordinator(dbtest.SQLite(t), &CoordinatorOptions{TTL: time.Minute})
	clk := clock.NewManual(time.Hour, 0)
	a := newClient(t, "a", ClientOptions{Clock: clk})
	l, err := coord.TryAcquire(ctx, a, "job")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(3 * time.Second)
	if age := l.Age(); age != 3*time.Second {
		t.Errorf("Age 3s after the grant's request = %v", age)
	}
	_, err = coord.TryAcquire(ctx, newClient(t, "b", ClientOptions{}), "job")
	if held, ok := errors.AsType[*HeldError](err); !ok || held.HeldBy != "a" || held.Resource != "job" || held.AlreadyHeld {
		t.Errorf("TryAcquire of a held resource = %v, want a *HeldError naming a", err)
	}
	_, err = coord.TryAcquire(ctx, a, "job")
	if held, ok := errors.AsType[*HeldError](err); !ok || !held.AlreadyHeld {
		t.Errorf("TryAcquire by the holder = %v, want a *HeldError with AlreadyHeld", err)
	}
	if _, err := coord.TryAcquire(ctx, a, ""); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("TryAcquire of an empty name = %v, want ErrInvalidInput", err)
	}
	if err := Release(ctx, newClient(t, "b", ClientOptions{}), coord, l); !errors.Is(err, fence.ErrInvalidInput) {
		t.Errorf("Release by another client = %v, want ErrInvalidInput", err)
	}
	if err := Release(ctx, a, coord, l); err != nil {
		t.Fatal(err)
	}
	if st, err := coord.Status(ctx, "job"); err != nil || st.Held {
		t.Errorf("after Release: %+v (%v)", st, err)
	}
	if got := coord.WaiterTTL(); got != 3*time.Second {
		t.Errorf("WaiterTTL = %v, want the default 3s", got)
	}
}
