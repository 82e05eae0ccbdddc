package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/dbtest"
	"github.com/fencegate/fencegate/sqlstore"
)

// keptCount is how many leases c's keeper renews.
func keptCount(c *Client) int {
	c.keeper.mu.Lock()
	defer c.keeper.mu.Unlock()
	return len(c.keeper.kept)
}

// A lost lease cancels its own Kept's context with a *LostError, and no
// other: the lease kept beside it stays renewed. Releasing after the loss
// is not an error and does not disturb the successor.
func TestKeepLossCancelsOnlyItsOwn(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// A term with a wide margin, so that a renewal batch (bounded by a
		// third of it) gets through on a loaded machine: 150 ms lost
		// "other" by its deadline under load, with SQLite's writer lock
		// contended.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: 4 * time.Second})
		a := newClient(t, "agent-a", ClientOptions{})
		b := newClient(t, "agent-b", ClientOptions{TTL: time.Minute})
		lost, err := Keep(ctx, a, coord, acquire(t, a, coord, "lost"))
		if err != nil {
			t.Fatal(err)
		}
		other := acquire(t, a, coord, "other")
		stays, err := Keep(ctx, a, coord, other)
		if err != nil {
			t.Fatal(err)
		}
		first := other.Grant().RequestID

		// Taken behind a's back: the next renewal of "lost" is refused.
		if _, err := coord.Release(ctx, lost.Lease().Token()); err != nil {
			t.Fatal(err)
		}
		acquire(t, b, coord, "lost")
		<-lost.Context().Done()
		var le *LostError
		if !errors.As(context.Cause(lost.Context()), &le) || le.Resource != "lost" || !errors.Is(le, ErrLeaseLost) {
			t.Fatalf("cause %v, want a *LostError for \"lost\"", context.Cause(lost.Context()))
		}

		// Two more renewals: "other" must be renewed throughout.
		if err := renewed(stays.Context(), other, 2); err != nil {
			t.Fatalf("the other lease: %v", err)
		}
		if other.Expired() || other.Grant().RequestID == first {
			t.Errorf("the other lease: expired %v, renewed %v", other.Expired(), other.Grant().RequestID != first)
		}

		if err := lost.Release(ctx); err != nil {
			t.Errorf("Release after loss = %v, want nil", err)
		}
		if st, _ := coord.Status(ctx, "lost"); !st.Held || st.Holder != "agent-b" {
			t.Errorf("the release after loss disturbed the successor: %+v", st)
		}
		if err := stays.Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Release stops the renewals at once, cancels Context without a loss,
// frees the resource, and is idempotent.
func TestKeepReleaseStopsRenewal(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// The test waits for no renewal: a long term only keeps the lease
		// from being born expired between acquire and Keep on a loaded
		// machine, as 200 ms could.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		c := newClient(t, "agent-a", ClientOptions{})
		l := acquire(t, c, coord, "job")
		k, err := Keep(ctx, c, coord, l)
		if err != nil {
			t.Fatal(err)
		}
		if k.Lease() != l || keptCount(c) != 1 {
			t.Fatalf("Lease() = %p (want %p), kept %d", k.Lease(), l, keptCount(c))
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if n := keptCount(c); n != 0 {
			t.Errorf("after Release the keeper still renews %d leases", n)
		}
		if k.Context().Err() == nil {
			t.Error("Context not cancelled by Release")
		}
		if errors.Is(context.Cause(k.Context()), ErrLeaseLost) {
			t.Errorf("Release reported a loss: %v", context.Cause(k.Context()))
		}
		if st, _ := coord.Status(ctx, "job"); st.Held || !st.Released {
			t.Errorf("Status after Release = %+v, want released", st)
		}
		if err := k.Release(ctx); err != nil {
			t.Errorf("second Release = %v", err)
		}
		// A released lease cannot be kept again.
		if _, err := Keep(ctx, c, coord, l); err == nil {
			t.Error("Keep of a released lease succeeded")
		}
	})
}

// When Keep's ctx ends, the lease is no longer renewed.
func TestKeepStopsWhenCtxEnds(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		// A term long enough that the lease is not born expired on a loaded
		// machine (150 ms was, between acquire and Keep), short enough that
		// the keeper's next look comes soon.
		const ttl = 3 * time.Second
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: ttl})
		c := newClient(t, "agent-a", ClientOptions{})
		l := acquire(t, c, coord, "job")
		ctx, cancel := context.WithCancel(context.Background())
		k, err := Keep(ctx, c, coord, l)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		<-k.Context().Done()
		// The keeper forgets it at its next look, at the latest at the
		// first renewal (a third of the term). Nothing announces the look:
		// poll the keeper's own state, up to a bound far past it. A keeper
		// that ignored the end of ctx would renew the lease and keep it
		// for as long as the test waits.
		deadline := time.Now().Add(10 * ttl)
		for keptCount(c) != 0 && time.Now().Before(deadline) {
			time.Sleep(ttl / 100)
		}
		if n := keptCount(c); n != 0 {
			t.Errorf("after ctx ended the keeper still renews %d leases", n)
		}
		if err := k.Release(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// Keep refuses a lease of another Client.
func TestKeepRefusesAnotherClientsLease(t *testing.T) {
	store := dbtest.SQLite(t)
	coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
	a := newClient(t, "agent-a", ClientOptions{})
	b := newClient(t, "agent-b", ClientOptions{})
	l := acquire(t, a, coord, "job")
	if _, err := Keep(context.Background(), b, coord, l); err == nil {
		t.Error("Keep of another Client's lease succeeded")
	}
}

// Many leases kept and released at once from many goroutines, each
// released twice concurrently, while the keeper renews them.
func TestKeepConcurrentUse(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		// Terms long enough for a loaded machine under -race: the test is
		// of the handles' concurrency, not of the schedule.
		const ttl = 3 * time.Second
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: ttl})
		c := newClient(t, "agent-a", ClientOptions{})
		const n = 8
		var wg sync.WaitGroup
		errs := make(chan error, 3*n)
		for i := range n {
			wg.Go(func() {
				res := fmt.Sprintf("job-%d", i)
				l, err := c.BeginAcquire(res)
				if err != nil {
					errs <- err
					return
				}
				out, err := coord.Acquire(ctx, l)
				if err != nil || !out.OK {
					errs <- fmt.Errorf("acquire %s: %v %+v", res, err, out)
					return
				}
				lease, err := c.CompleteAcquire(l, out.Grant)
				if err != nil {
					errs <- err
					return
				}
				k, err := Keep(ctx, c, coord, lease)
				if err != nil {
					errs <- err
					return
				}
				select { // past the first renewal
				case <-k.Context().Done():
					errs <- fmt.Errorf("%s lost: %v", res, context.Cause(k.Context()))
				case <-time.After(ttl / 2):
				}
				var rel sync.WaitGroup
				for range 2 {
					rel.Go(func() {
						if err := k.Release(ctx); err != nil {
							errs <- err
						}
					})
				}
				rel.Wait()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if k := keptCount(c); k != 0 {
			t.Errorf("kept after all released: %d", k)
		}
	})
}
