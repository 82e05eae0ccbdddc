package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// After a failover to an asynchronous replica, AdvanceFences moves the
// sequence past every fence the database knows of, floors and leases
// included, plus the margin; the next grant is above them all.
func TestAdvanceFences(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		a := newClient(t, "agent-a", ClientOptions{})
		coord := NewCoordinator(store, nil)
		l1 := acquire(t, a, coord, "r1")

		// A floor and a lease above the sequence: what a replica can hold
		// when its sequence's state lags its rows. A floor of a resource
		// never leased has fences of another source, and is left out.
		if _, err := store.Executor().FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "r1", Holder: "h", Fence: 750}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Executor().FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: "ext", Holder: "h", Fence: 5000}); err != nil {
			t.Fatal(err)
		}
		err := store.InTx(ctx, func(ex sqlstore.Executor) error {
			_, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{Resource: "r2", Holder: "old-primary", Fence: 700, RequestID: "lost", TTL: time.Minute})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}

		next, err := coord.AdvanceFences(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if next != 851 {
			t.Errorf("AdvanceFences(100) = %d, want 851 (r1's floor 750 + 100 + 1)", next)
		}
		l3 := acquire(t, a, coord, "r3")
		if l3.Token().Fence < next || l3.Token().Fence <= l1.Token().Fence {
			t.Errorf("next grant's fence %d, want at least %d", l3.Token().Fence, next)
		}
		// Again: from the new grant, never back.
		again, err := coord.AdvanceFences(ctx, 0)
		if err != nil || again <= l3.Token().Fence {
			t.Errorf("AdvanceFences(0) after fence %d = %d, %v", l3.Token().Fence, again, err)
		}
		if _, err := coord.AdvanceFences(ctx, -1); !errors.Is(err, fence.ErrInvalidInput) {
			t.Errorf("negative margin: %v, want ErrInvalidInput", err)
		}
	})
}
