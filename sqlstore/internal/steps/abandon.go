package steps

import (
	"context"
	"errors"

	"github.com/fencegate/fencegate/sqlstore"
)

// Abandon runs sqlstore.Executor.LeaseAbandon's rules, on every dialect: in
// a transaction of its own with inTx, in ex's (the caller's) with nil.
//
// Why it is safe against a sending of the request still in flight: every
// acquisition (these steps, and Postgres's functions) locks a member's
// lease row before it reads the request table, and the abandon holds the
// same lock while it reads and writes it, so the two run one after the
// other. An acquisition after the abandon finds the request recorded and
// answers AcquireRequestExpired; an abandon after the acquisition finds the
// lease it made and releases it. A member never leased has no row to lock:
// the abandon inserts one, over at once, and a first grant that races it
// loses the insert (or wins it, and the abandon reads its row again), then
// reads the request as spent.
func Abandon(ctx context.Context, ex sqlstore.Executor, inTx InTx, p *sqlstore.LeaseAbandonParams) (sqlstore.LeaseAbandonResult, error) {
	members := p.Members
	if len(members) == 0 {
		members = []string{p.Resource}
	}
	var res sqlstore.LeaseAbandonResult
	run := func(ex sqlstore.Executor) error {
		res = sqlstore.LeaseAbandonResult{}
		if err := ex.SetLockTimeout(ctx, p.LockTimeout); err != nil {
			return err
		}
		for _, m := range members { // sorted, as an acquisition locks them
			released, err := abandon(ctx, ex, p, m)
			if err != nil {
				return err
			}
			res.Released = res.Released || released
		}
		return nil
	}
	if inTx == nil {
		return res, run(ex)
	}
	return res, inTx(ctx, run)
}

// abandon spends p's request on one member, and reports whether it
// released the live lease the request made there.
func abandon(ctx context.Context, ex sqlstore.Executor, p *sqlstore.LeaseAbandonParams, m string) (bool, error) {
	for range attempts {
		row, err := ex.LeaseGetForUpdate(ctx, m)
		if err != nil {
			return false, err
		}
		if row.Live() && row.Holder == p.Holder && row.RequestID == p.RequestID {
			r, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: m, Holder: p.Holder, Fence: row.Fence})
			return r.Released, err
		}
		if row.Found && row.RequestID == p.RequestID && inRow(ex) {
			return false, nil // its lease is over: the row records it until overwritten
		}
		fence, err := ex.RequestFence(ctx, m, p.RequestID)
		switch {
		case err != nil:
			return false, err
		case fence != 0 && !row.Found:
			continue // its grant committed after the read: read it again
		case fence != 0:
			return false, nil // its lease is over, or it was spent already
		}
		spent, err := ex.FenceNext(ctx)
		if err != nil {
			return false, err
		}
		if row.Found {
			return false, ex.RequestRecord(ctx, m, p.RequestID, spent)
		}
		_, inserted, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource: m, Holder: p.Holder, Fence: spent, RequestID: p.RequestID, TTL: 0,
		})
		if err != nil || inserted {
			return false, err
		}
		// A concurrent first acquisition created the row: read it again.
	}
	return false, errors.New("the lease row kept changing under a concurrent acquisition")
}
