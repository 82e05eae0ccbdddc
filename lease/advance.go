package lease

import (
	"context"
	"math"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// AdvanceFences moves the fence sequence past anything that might have been
// issued, for the moment after a failover to an asynchronous replica: the
// old primary may have granted fences (and acknowledged them) that the
// replica never received, and issuing one of them again would let two
// holders carry the same fence. It raises the sequence so that the next
// grant's fence is above max(every lease's fence, the floor of every leased
// resource, the sequence's own value) + margin, and returns that lowest
// next fence. The floors of resources that were never leased are left out:
// their fences come from another source (gate.Admit), whose numbers are not
// the coordinator's to skip; a grant there still meets ErrFloorAhead.
//
// margin is how many fences the old primary could have issued that left
// no trace on the replica: at least the grants it could make in the
// replication lag. Run it after the promotion and before any client reaches
// the promoted database. It runs under the same sequence lock as
// StartFence's move (on Postgres, concurrent grants wait for it), so a
// grant in flight is covered. It consumes one fence. A negative margin is
// an InvalidInputError.
func (c *Coordinator) AdvanceFences(ctx context.Context, margin int64) (int64, error) {
	if margin < 0 {
		return 0, &fence.InvalidInputError{Field: "margin", Reason: "must not be negative"}
	}
	var next int64
	err := c.store.InTx(ctx, func(ex sqlstore.Executor) error {
		if err := ex.FenceAtLeast(ctx, 2); err != nil { // takes the sequence lock first
			return err
		}
		high, err := ex.FenceNext(ctx)
		if err != nil {
			return err
		}
		leases, err := ex.LeaseList(ctx)
		if err != nil {
			return err
		}
		leased := make(map[string]bool, len(leases))
		for _, l := range leases {
			high, leased[l.Resource] = max(high, l.Fence), true
		}
		floors, err := ex.FloorList(ctx)
		if err != nil {
			return err
		}
		for _, f := range floors {
			if leased[f.Resource] {
				high = max(high, f.Floor)
			}
		}
		if high > math.MaxInt64-1-margin {
			return &fence.InvalidInputError{Field: "margin", Reason: "moves the fence sequence past the largest fence"}
		}
		next = high + margin + 1
		return ex.FenceAtLeast(ctx, next)
	})
	if err != nil {
		return 0, c.wrap("advance fences", "", err)
	}
	return next, nil
}
