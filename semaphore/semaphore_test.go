package semaphore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

func TestSemaphore(t *testing.T) {
	forEachDriver(t, testSemaphore[*sql.Tx], testSemaphore[pgx.Tx])
}

// Four workers on separate connections and Coordinators share two
// permits; one of them is killed holding its permit (it never releases).
// At no grant are more than two permits live in the database, nor do more
// than two workers believe they hold one; each permit's write goes through
// the gate on its own slot, and the killed worker's late write is refused
// once its slot was granted again.
func testSemaphore[TTx any](t *testing.T, h harness[TTx]) {
	ctx := context.Background()
	const workers, rounds, permits = 4, 3, 2
	g := gate.New(h.Driver, nil)
	var (
		holding atomic.Int32
		wg      sync.WaitGroup
		killed  = make(chan fence.Token, 1)
		errs    = make(chan error, workers*rounds*3)
	)
	for i := range workers {
		store, closeStore := h.Reopen(t)
		t.Cleanup(closeStore)
		// A term with a wide margin: each worker writes before its permit
		// runs out, on a loaded machine too.
		coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: 4 * time.Second, WaiterTTL: 600 * time.Millisecond})
		c := newClient(t, fmt.Sprintf("worker-%d", i), lease.ClientOptions{ClockSkew: 300 * time.Millisecond})
		s, err := New(coord, c, "pool", permits)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				p, err := s.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				if n := holding.Add(1); n > permits {
					errs <- fmt.Errorf("%s believes it holds %v beside %d others", c.Holder(), p, n-1)
				}
				live := 0
				for k := range permits + 1 {
					st, err := coord.Status(ctx, s.slot(k))
					if err != nil {
						errs <- err
					}
					if st.Held {
						live++
					}
				}
				if live > permits {
					errs <- fmt.Errorf("%d permits live at the grant of %v", live, p)
				}
				if err := g.Do(ctx, p.Token(), func(context.Context, TTx) error { return nil }); err != nil {
					errs <- fmt.Errorf("%v: write: %w", p, err)
				}
				if i == 0 && r == 0 {
					// Killed: never released, and a dead worker believes
					// nothing.
					holding.Add(-1)
					killed <- p.Token()
					continue
				}
				holding.Add(-1)
				if err := p.Release(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Every permit, once the killed one's term is over: its slot is
	// granted again, and its late write refused.
	tok := <-killed
	coord := lease.NewCoordinator(h.Driver, &lease.CoordinatorOptions{TTL: time.Minute})
	last, err := New(coord, newClient(t, "last", lease.ClientOptions{}), "pool", permits)
	if err != nil {
		t.Fatal(err)
	}
	for range permits {
		if _, err := last.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	err = g.Do(ctx, tok, func(context.Context, TTx) error { return nil })
	var stale *gate.StaleFenceError
	if !errors.As(err, &stale) {
		t.Errorf("the killed worker's late write = %v, want a *gate.StaleFenceError (its slot was granted again)", err)
	}
}

// Lowering N revokes no live permit, and grants none until fewer than the
// new N are live.
func TestSemaphoreLowered(t *testing.T) {
	dbtest.ForEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
		three, err := New(coord, newClient(t, "old", lease.ClientOptions{}), "pool", 3)
		if err != nil {
			t.Fatal(err)
		}
		var ps []*Permit
		for range 3 {
			p, err := three.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		two, err := New(coord, newClient(t, "new", lease.ClientOptions{}), "pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := two.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire with 3 live of 2 = %v, want lease.ErrHeld", err)
		}
		if err := ps[0].Release(ctx); err != nil { // slot 0: 2 live, with slot 2
			t.Fatal(err)
		}
		if _, err := two.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire with 2 live of 2 (one above N) = %v, want lease.ErrHeld", err)
		}
		if st, _ := coord.Status(ctx, "pool#0"); st.Held {
			t.Errorf("the refused grant of slot 0 was not released: %+v", st)
		}
		for _, p := range ps[1:] {
			if p.Lease().Expired() {
				t.Errorf("%v revoked", p)
			}
		}
		if err := ps[2].Release(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := two.TryAcquire(ctx)
		if err != nil {
			t.Fatalf("TryAcquire with 1 live of 2 = %v", err)
		}
		if p.Slot() != 0 {
			t.Errorf("granted %v, want slot 0", p)
		}
	})
}

// Waiters are granted in the order they joined the line.
func TestSemaphoreOrder(t *testing.T) {
	ctx := context.Background()
	queued := make(chan string, 3)
	store := queueingStore{Store: dbtest.SQLite(t), queued: queued}
	coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
	c := newClient(t, "first", lease.ClientOptions{})
	first, err := New(coord, c, "pool", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := first.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the line too, so that every waiter below joins its queue.
	line := acquire(t, c, coord, "pool#line")
	got := make(chan string, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		s, err := New(coord, newClient(t, fmt.Sprintf("w%d", i), lease.ClientOptions{}), "pool", 1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- s.client.Holder()
			if err := p.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
		<-queued // the next joins only once this one stands in line
	}
	if _, err := first.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
		t.Errorf("TryAcquire past the line = %v, want lease.ErrHeld", err)
	}
	if _, err := coord.Release(ctx, line.Token()); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(got)
	var order []string
	for h := range got {
		order = append(order, h)
	}
	if strings.Join(order, " ") != "w0 w1 w2" {
		t.Errorf("granted in the order %v, want w0 w1 w2", order)
	}
}

// Bad input changes nothing: an empty name, N out of range, a token of
// another semaphore.
func TestSemaphoreBadInput(t *testing.T) {
	ctx := context.Background()
	store := dbtest.SQLite(t)
	coord := lease.NewCoordinator(store, nil)
	c := newClient(t, "a", lease.ClientOptions{})
	for name, n := range map[string]int{"": 1, "zero": 0, "negative": -1, "too many": MaxPermits + 1, strings.Repeat("x", fence.MaxNameLen): 1} {
		if _, err := New(coord, c, name, n); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("New(%.10q, %d) = %v, want ErrInvalidInput", name, n, err)
		}
	}
	a, err := New(coord, c, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(coord, c, "ab", 2)
	if err != nil {
		t.Fatal(err)
	}
	p, err := other.TryAcquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []fence.Token{p.Token(), {Resource: "a#01", Holder: "a", Fence: 1}, {Resource: "a#line", Holder: "a", Fence: 1}, {Resource: "a", Holder: "a", Fence: 1}} {
		if _, err := a.Release(ctx, tok); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("Release(%v) on semaphore a = %v, want ErrInvalidInput", tok, err)
		}
	}
	if st, _ := coord.Status(ctx, p.Token().Resource); !st.Held {
		t.Errorf("another semaphore's permit was released: %+v", st)
	}
	if ok, err := other.Release(ctx, p.Token()); !ok || err != nil {
		t.Errorf("Release of its own permit = %v, %v", ok, err)
	}
}

// N stored in the database rules every participant, whatever n each was
// built with: lowered, it revokes no live permit and grants nothing until
// fewer than it are live; raised, it grants at once. Bad N changes nothing.
func TestSemaphoreStoredPermits(t *testing.T) {
	dbtest.ForEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := lease.NewCoordinator(store, &lease.CoordinatorOptions{TTL: time.Minute})
		a, err := New(coord, newClient(t, "a", lease.ClientOptions{}), "stored", 3)
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(coord, newClient(t, "b", lease.ClientOptions{}), "stored", 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, found, err := a.StoredPermits(ctx); found || err != nil {
			t.Fatalf("StoredPermits before any = %v, %v; want none", found, err)
		}
		err = b.SetPermits(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SetPermits(ctx, 3); err != nil { // back to 3, to fill three slots
			t.Fatal(err)
		}
		var ps []*Permit
		for range 3 {
			p, err := a.TryAcquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		if err := b.SetPermits(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if n, found, err := a.StoredPermits(ctx); n != 2 || !found || err != nil {
			t.Fatalf("StoredPermits = %d, %v, %v; want 2", n, found, err)
		}
		for _, p := range ps {
			if st, _ := coord.Status(ctx, p.Token().Resource); !st.Held || st.Fence != p.Token().Fence {
				t.Errorf("%v revoked by lowering N: %+v", p, st)
			}
		}
		// a was built with 3, but the stored 2 rules it.
		if _, err := a.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire with 3 live of a stored 2 = %v, want lease.ErrHeld", err)
		}
		if err := ps[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := a.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire with 2 live (one above N) of a stored 2 = %v, want lease.ErrHeld", err)
		}
		if st, _ := coord.Status(ctx, "stored#0"); st.Held {
			t.Errorf("the refused grant of slot 0 was not given back: %+v", st)
		}
		if err := ps[2].Release(ctx); err != nil {
			t.Fatal(err)
		}
		p, err := a.TryAcquire(ctx)
		if err != nil || p.Slot() != 0 {
			t.Fatalf("TryAcquire with 1 live of 2 = %v, %v; want slot 0", p, err)
		}
		// Raised: b (built with 3) grants slot 2 at once, a fourth slot only
		// once N is 4.
		if err := a.SetPermits(ctx, 4); err != nil {
			t.Fatal(err)
		}
		for _, want := range []int{2, 3} {
			q, err := b.TryAcquire(ctx)
			if err != nil || q.Slot() != want {
				t.Fatalf("TryAcquire under N = 4 = %v, %v; want slot %d", q, err, want)
			}
		}
		if _, err := b.TryAcquire(ctx); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("TryAcquire with 4 live of 4 = %v, want lease.ErrHeld", err)
		}
		for _, n := range []int{0, -1, MaxPermits + 1} {
			if err := b.SetPermits(ctx, n); !errors.Is(err, fence.ErrInvalidInput) {
				t.Errorf("SetPermits(%d) = %v, want ErrInvalidInput", n, err)
			}
		}
		if n, _, err := a.StoredPermits(ctx); n != 4 || err != nil {
			t.Errorf("after bad SetPermits, StoredPermits = %d, %v; want 4 unchanged", n, err)
		}
	})
}

// cancellingStore cancels the context of the first read of a semaphore's
// permits and fails it with the context's error, as a read cut short by
// the caller's cancellation would fail.
type cancellingStore struct {
	sqlstore.Store
	cancel context.CancelFunc
}

func (s cancellingStore) Executor() sqlstore.Executor {
	return cancellingExecutor{s.Store.Executor(), s.cancel}
}

type cancellingExecutor struct {
	sqlstore.Executor
	cancel context.CancelFunc
}

func (e cancellingExecutor) SemaphorePermits(ctx context.Context, name string) (int, bool, error) {
	e.cancel()
	<-ctx.Done()
	return 0, false, ctx.Err()
}

// A wait for a permit whose context ends while no slot has answered yet
// still says who it waited for: ctx's error joined with a *lease.HeldError (a
// nil one, joined, made the error's text panic).
func TestSemaphoreAcquireEndsBeforeAnySlotAnswered(t *testing.T) {
	dbtest.ForEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hctx, hcancel := context.WithCancel(ctx)
		defer hcancel()
		coord := lease.NewCoordinator(cancellingStore{store, hcancel}, nil)
		s, err := New(coord, newClient(t, "a", lease.ClientOptions{}), "pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(hctx)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("Acquire = %v; want context.Canceled joined with a *lease.HeldError", err)
		}
		_ = err.Error() // must not panic
	})
}
