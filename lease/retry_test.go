package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// Concurrent copies of one request (a client that retried after a lost
// reply, many times at once) all get the one grant that request made, on
// a resource never leased before, where the copies race to create its
// lease row: none is told the request expired while its lease is live.
func TestConcurrentCopiesOfOneRequestAllGetTheGrant(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		// Each round is the race: 40 copies at once. Three rounds on each
		// of ten drivers: eight took a tenth of the package's time under
		// -race, on the critical path.
		const (
			rounds = 3
			copies = 40
		)
		ctx := context.Background()
		// A term that outlives the round on a loaded machine: every copy
		// must find the lease live.
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		c := newClient(t, "agent-a", ClientOptions{})
		for round := range rounds {
			resource := fmt.Sprintf("copies-%d", round)
			req, err := c.BeginAcquire(resource)
			if err != nil {
				t.Fatal(err)
			}
			fences := make([]int64, copies)
			var start, wg sync.WaitGroup
			start.Add(1)
			for i := range copies {
				wg.Go(func() {
					start.Wait()
					for {
						out, err := coord.Acquire(ctx, req)
						if errors.Is(err, ErrBusy) {
							continue // a copy like any other: send it again
						}
						switch {
						case err != nil:
							t.Errorf("%s: copy %d: %v", resource, i, err)
						case !out.OK:
							t.Errorf("%s: copy %d denied: %+v", resource, i, out)
						default:
							fences[i] = out.Grant.Fence
						}
						return
					}
				})
			}
			start.Done()
			wg.Wait()
			if t.Failed() {
				return
			}
			for i, f := range fences {
				if f != fences[0] {
					t.Fatalf("%s: copy %d got fence %d, copy 0 fence %d: one request, two grants", resource, i, f, fences[0])
				}
			}
		}
	})
}

// Another holder that sends the request id of a live lease is not granted
// and not told the request expired: it is told who holds the lease.
func TestAnotherHolderReusingALiveRequestIDIsToldWhoHolds(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: time.Minute})
		a := newClient(t, "agent-a", ClientOptions{})
		la := acquire(t, a, coord, "r")
		for _, copyOf := range []*AcquireRequest{
			{Resource: "r", Holder: "agent-b", RequestID: la.Token().Holder}, // an unused id, for contrast
			{Resource: "r", Holder: "agent-b", RequestID: requestIDOf(t, coord, "r")},
		} {
			out, err := coord.Acquire(ctx, copyOf)
			if err != nil {
				t.Fatalf("Acquire(holder %s, request %s) = %v, want the held outcome", copyOf.Holder, copyOf.RequestID, err)
			}
			if out.OK || out.HeldBy != "agent-a" || out.Fence != la.Token().Fence || out.AlreadyHeld || out.RetryAfter <= 0 {
				t.Fatalf("Acquire(holder %s, request %s) = %+v, want held by agent-a with fence %d", copyOf.Holder, copyOf.RequestID, out, la.Token().Fence)
			}
		}
		if st, _ := coord.Status(ctx, "r"); !st.Held || st.Holder != "agent-a" || st.Fence != la.Token().Fence {
			t.Fatalf("the reused id changed the lease: %+v", st)
		}
	})
}

// requestIDOf reads the request id of resource's lease.
func requestIDOf(t *testing.T, coord *Coordinator, resource string) string {
	t.Helper()
	row, err := coord.store.Executor().LeaseGet(context.Background(), resource)
	if err != nil {
		t.Fatal(err)
	}
	return row.RequestID
}
