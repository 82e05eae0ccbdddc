package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// TestRetryAfterPruningIsNeverGrantedTwice: a request's lease is over, a
// new generation overwrote its lease row, its request row is pruned, and a
// retry of it is still refused with ErrRequestExpired (its first sending
// was more than its term ago on its holder's clock), granting nothing. The
// same request decoded from the wire (no send instant) is granted: the
// record really is gone, and the send instant is what refuses the retry.
// Expired waiter rows are pruned too. The request is sent twice, so that
// its release is not settled (settle.go) and its record is kept.
func TestRetryAfterPruningIsNeverGrantedTwice(t *testing.T) {
	forWaitStores(t, waitDrivers, nil, func(t *testing.T, store sqlstore.Store, _ queryFunc) {
		ctx := context.Background()
		r := resourceName(t)
		const term = 2 * time.Second // long enough to release on a loaded machine
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: term, MaxTTL: term})
		clk := clock.NewManual(time.Hour, 0)
		c := newClient(t, "h", ClientOptions{TTL: term, Clock: clk})
		req, err := c.BeginAcquire(r)
		if err != nil {
			t.Fatal(err)
		}
		out, err := coord.Acquire(ctx, req)
		if err != nil || !out.OK {
			t.Fatalf("Acquire = %+v, %v", out, err)
		}
		if again, err := coord.Acquire(ctx, req); err != nil || !again.OK || again.Grant.Fence != out.Grant.Fence {
			t.Fatalf("the second sending = %+v, %v; want the same grant", again, err)
		}
		l, err := c.CompleteAcquire(req, out.Grant)
		if err != nil {
			t.Fatal(err)
		}
		releaseOK(t, c, coord, l)
		if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
			t.Fatalf("retry before pruning = %v, want ErrRequestExpired", err)
		}
		// A new generation overwrites the row: the request's record is
		// now the request table's alone.
		c2 := newClient(t, "h2", ClientOptions{TTL: term, Clock: clk})
		req2, err := c2.BeginAcquire(r)
		if err != nil {
			t.Fatal(err)
		}
		out2, err := coord.Acquire(ctx, req2)
		if err != nil || !out2.OK {
			t.Fatalf("Acquire of the next generation = %+v, %v", out2, err)
		}
		l2, err := c2.CompleteAcquire(req2, out2.Grant)
		if err != nil {
			t.Fatal(err)
		}
		releaseOK(t, c2, coord, l2)
		if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
			t.Fatalf("retry after the row was overwritten = %v, want ErrRequestExpired", err)
		}
		if _, err := store.Executor().WaiterAdd(ctx, &sqlstore.WaiterAddParams{Resource: r, Holder: "w", TTL: MinTTL}); err != nil {
			t.Fatal(err)
		}

		if _, err := coord.Prune(ctx, PruneOptions{RequestAge: term / 2}); !errors.Is(err, fence.ErrInvalidInput) {
			t.Fatalf("Prune with RequestAge below MaxTTL = %v, want ErrInvalidInput", err)
		}
		// The database's clock runs on its own: prune until the row is old
		// enough to go (a state polled, not a duration slept).
		var pruned PruneResult
		deadline := time.Now().Add(recvTimeout)
		for pruned.Requests == 0 || pruned.Waiters == 0 {
			res, err := coord.Prune(ctx, PruneOptions{RequestAge: term, BatchSize: 1})
			if err != nil {
				t.Fatal(err)
			}
			pruned.Requests += res.Requests
			pruned.Waiters += res.Waiters
			if time.Now().After(deadline) {
				t.Fatalf("pruned %+v within %v, want the request and the waiter", pruned, recvTimeout)
			}
			time.Sleep(20 * time.Millisecond) // polling the database's clock
		}
		if ws, err := store.Executor().WaiterList(ctx, r); err != nil || len(ws) != 0 {
			t.Fatalf("waiters after pruning: %v, %v", ws, err)
		}

		clk.Advance(term + time.Millisecond) // the retry comes after its term
		if _, err := coord.Acquire(ctx, req); !errors.Is(err, ErrRequestExpired) {
			t.Fatalf("retry after pruning = %v, want ErrRequestExpired", err)
		}
		if st, err := coord.Status(ctx, r); err != nil || st.Held || st.Fence != l2.Token().Fence {
			t.Fatalf("Status after the refused retry = %+v, %v; want the last lease's fence %d, not held", st, err, l2.Token().Fence)
		}

		// The wire copy carries no send instant: judged by its row, which is
		// gone, it is granted afresh (Coordinator.Prune documents this).
		wire := &AcquireRequest{Resource: req.Resource, Holder: req.Holder, RequestID: req.RequestID, TTL: req.TTL}
		if out, err := coord.Acquire(ctx, wire); err != nil || !out.OK {
			t.Fatalf("the wire copy after pruning = %+v, %v; want a grant (the row is gone)", out, err)
		}
	})
}
