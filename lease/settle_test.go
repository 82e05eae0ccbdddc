package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// A lease granted to a request sent once is released settled (settle.go):
// the request is never sent again, ErrRequestExpired from the Coordinator,
// also once a new generation overwrote the row that held it. A request
// sent twice is released unsettled, and the store refuses its copies, from
// the lease row and, once the row is overwritten, from its record.
func TestSettledRequestIsNeverSentAgain(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		c := newClient(t, "h", ClientOptions{TTL: time.Minute})
		take := func(sends int) (*AcquireRequest, *Lease) {
			t.Helper()
			req, err := c.BeginAcquire(r)
			if err != nil {
				t.Fatal(err)
			}
			var out AcquireOutcome
			for range sends {
				if out, err = coord.Acquire(ctx, req); err != nil || !out.OK {
					t.Fatalf("Acquire = %+v, %v", out, err)
				}
			}
			l, err := c.CompleteAcquire(req, out.Grant)
			if err != nil {
				t.Fatal(err)
			}
			releaseOK(t, c, coord, l)
			return req, l
		}
		once, _ := take(1)
		if n := once.sends.Load(); n != settledSends {
			t.Fatalf("a request sent once and released: sends = %d, want settled", n)
		}
		twice, _ := take(2) // overwrites once's row
		if n := twice.sends.Load(); n != 2 {
			t.Fatalf("a request sent twice and released: sends = %d, want 2 (not settled)", n)
		}
		for name, req := range map[string]*AcquireRequest{"settled": once, "sent twice, row released": twice} {
			if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
				t.Fatalf("%s: Acquire again = %v, want ErrRequestExpired", name, err)
			}
		}
		_, last := take(1) // overwrites twice's row: its record is the request table's
		for name, req := range map[string]*AcquireRequest{"settled": once, "sent twice, row overwritten": twice} {
			if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
				t.Fatalf("%s: Acquire again = %v, want ErrRequestExpired", name, err)
			}
		}
		if st, err := coord.Status(ctx, r); err != nil || st.Held || st.Fence != last.Token().Fence {
			t.Fatalf("Status = %+v, %v; want the last lease's fence %d, not held: nothing granted again", st, err, last.Token().Fence)
		}
	})
}

// A request that came over a wire is a new AcquireRequest at each delivery
// (no Client of this process began it), so that one sending of it says
// nothing of the copies still in flight: its release must not settle it,
// and a copy delivered after the next generation is refused by the
// database's record, never granted again.
func TestWireRequestIsNeverSettled(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		c := newClient(t, "h", ClientOptions{TTL: time.Minute})
		begun, err := c.BeginAcquire(r)
		if err != nil {
			t.Fatal(err)
		}
		deliver := func() *AcquireRequest { // what a coordinator behind a wire decodes
			return &AcquireRequest{Resource: begun.Resource, Holder: begun.Holder, RequestID: begun.RequestID, TTL: begun.TTL}
		}
		out, err := coord.Acquire(ctx, deliver())
		if err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		first := fence.Token{Resource: r, Holder: "h", Fence: out.Grant.Fence}
		if released, err := coord.Release(ctx, first); err != nil || !released {
			t.Fatalf("Release = %v, %v", released, err)
		}
		next, err := c.BeginAcquire(r) // a new generation overwrites the row
		if err != nil {
			t.Fatal(err)
		}
		out, err = coord.Acquire(ctx, next)
		if err != nil || !out.OK {
			t.Fatalf("Acquire of the next request = %+v, %v", out, err)
		}
		second := fence.Token{Resource: r, Holder: "h", Fence: out.Grant.Fence}
		if released, err := coord.Release(ctx, second); err != nil || !released {
			t.Fatalf("Release = %v, %v", released, err)
		}
		// The resource is free: a copy the store did not refuse would be
		// granted a second time.
		if out, err := coord.Acquire(ctx, deliver()); !errors.Is(err, ErrRequestExpired) {
			t.Fatalf("a late copy of the first request: Acquire = %+v, %v; want ErrRequestExpired", out, err)
		}
	})
}
