package steps

import (
	"context"
	"errors"
	"slices"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// errSetRetry makes InTx roll back a set's grant that lost the race to
// insert a member's lease row; the acquisition is tried again.
var errSetRetry = errors.New("fencegate: a member's row was created by a concurrent acquisition")

// setAnswer makes InTx roll back a set's grant half done, and carries the
// answer to give instead (Held, RequestExpired, FloorAhead).
type setAnswer struct{ res sqlstore.LeaseAcquireResult }

func (e *setAnswer) Error() string { return "the set's grant was rolled back" }

// acquireSet runs LeaseAcquire's rules for a claim of p.Members: with
// inTx, acquireSetTx in a transaction of its own, tried again when a
// member's row was created under it; with nil, once in ex's (the caller's)
// transaction, which an answer after a write leaves to roll back
// (ErrFloorMoved).
func acquireSet(ctx context.Context, ex sqlstore.Executor, inTx InTx, p *sqlstore.LeaseAcquireParams) (res sqlstore.LeaseAcquireResult, err error) {
	if inTx == nil {
		sending(p.Sending)
		res, err = acquireSetTx(ctx, ex, p, p.Members)
		if err != nil && (errors.Is(err, errSetRetry) || errors.As(err, new(*setAnswer))) {
			return sqlstore.LeaseAcquireResult{}, ErrFloorMoved
		}
		return res, err
	}
	for range attempts {
		err = inTx(ctx, func(ex sqlstore.Executor) error {
			sending(p.Sending) // the transaction has begun: its statements go out now
			var err error
			res, err = acquireSetTx(ctx, ex, p, p.Members)
			return err
		})
		if ans, ok := errors.AsType[*setAnswer](err); ok {
			return ans.res, nil // rolled back: nothing was written
		}
		if !errors.Is(err, errSetRetry) {
			return res, err
		}
	}
	return sqlstore.LeaseAcquireResult{}, errors.New("the lease rows kept changing under concurrent acquisitions")
}

// acquireSetTx grants members (sorted) in one transaction, all or none,
// under one fence. Locks are taken in one global order, so overlapping
// claims queue instead of deadlocking: first the path locks (each path
// member's exclusive, the directories above it shared; sorted), then the
// members' lease rows (sorted), then the fence, then their floors (sorted).
//
// The answer: Retried when every member is the live lease of this very
// request (a retry after a lost reply); RequestExpired when the request
// made a generation that is over (for any member); Held, with the blocking
// lease, when a member, a directory above a path member, or a lease below a
// directory member is live; FloorAhead when a member's floor is above the
// new fence; else Granted, every member's lease written and floor raised.
// Every answer but Granted and Retried writes nothing.
func acquireSetTx(ctx context.Context, ex sqlstore.Executor, p *sqlstore.LeaseAcquireParams, members []string) (sqlstore.LeaseAcquireResult, error) {
	if err := ex.SetLockTimeout(ctx, p.LockTimeout); err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	// 1. Path locks.
	exclusive := map[string]bool{}
	for _, m := range members {
		if !fence.IsPath(m) {
			continue
		}
		exclusive[m] = true
		for _, a := range fence.Ancestors(m) {
			exclusive[a] = exclusive[a] || false // a member is never above another (ValidateSet)
		}
	}
	paths := make([]string, 0, len(exclusive))
	for r := range exclusive {
		paths = append(paths, r)
	}
	slices.Sort(paths)
	for _, r := range paths {
		if err := ex.PathLock(ctx, r, exclusive[r]); err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
	}

	// 2. The members' lease rows, each judged as Acquire judges one.
	rows := make([]sqlstore.LeaseRow, len(members))
	retried := 0
	for i, m := range members {
		row, err := ex.LeaseGetForUpdate(ctx, m)
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		rows[i] = row
		if row.Live() && row.Holder == p.Holder && row.RequestID == p.RequestID {
			retried++
			continue
		}
		if ownOver(ex, row, p.RequestID) {
			// The row's generation, over, was this request's (the row
			// records it until it is overwritten, recordOverwritten).
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: row.Fence}, nil
		}
		if !row.Live() || row.RequestID != p.RequestID {
			fence, err := ex.RequestFence(ctx, m, p.RequestID)
			switch {
			case err != nil:
				return sqlstore.LeaseAcquireResult{}, err
			case fence != 0 && !row.Found:
				// This request's grant committed after the read found no
				// row (a concurrent copy of it): read everything again.
				return sqlstore.LeaseAcquireResult{}, errSetRetry
			case fence != 0:
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: fence}, nil
			}
		}
		if row.Live() {
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
		}
	}
	switch {
	case retried == len(members):
		return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRetried, Lease: earliest(rows)}, removeWaiter(ctx, ex, p.Waiter)
	case retried > 0:
		// Part of this request's grant is over (a member released on its
		// own): the claim is not whole, and is never granted again.
		return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: rows[slices.IndexFunc(rows, sqlstore.LeaseRow.Live)].Fence}, nil
	}

	// The path rule: no live claim above a path member, nor below a
	// directory member. The path locks make these reads current.
	for _, m := range members {
		if !fence.IsPath(m) {
			continue
		}
		for _, a := range fence.Ancestors(m) {
			row, err := ex.LeaseGet(ctx, a)
			if err != nil && !errors.Is(err, sqlstore.ErrNotFound) {
				return sqlstore.LeaseAcquireResult{}, err
			}
			if err == nil && row.Live() {
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
			}
		}
		if fence.IsDir(m) {
			row, err := ex.LeaseLiveBelow(ctx, m)
			if err != nil {
				return sqlstore.LeaseAcquireResult{}, err
			}
			if row.Found && row.Live() {
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
			}
		}
	}

	// 3. One fence for the whole set, every member's lease and floor.
	fence, err := ex.FenceNext(ctx)
	if err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	granted := make([]sqlstore.LeaseRow, len(members))
	for i, m := range members {
		if err := recordOverwritten(ctx, ex, rows[i]); err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		row, inserted, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource: m, Holder: p.Holder, Fence: fence, RequestID: p.RequestID, TTL: p.TTL, Replace: rows[i].Found,
		})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !rows[i].Found && !inserted {
			return sqlstore.LeaseAcquireResult{}, errSetRetry
		}
		granted[i] = row
	}
	for _, m := range members {
		floor, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: m, Holder: p.Holder, Fence: fence})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !floor.Admitted {
			return sqlstore.LeaseAcquireResult{}, &setAnswer{sqlstore.LeaseAcquireResult{
				Status: sqlstore.AcquireFloorAhead, Fence: fence, Floor: floor.Floor, FloorHolder: floor.FloorHolder,
			}}
		}
	}
	return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireGranted, Lease: earliest(granted)}, removeWaiter(ctx, ex, p.Waiter)
}

// earliest is the row of a set whose term ends first (with the latest
// clock), which the set's grant reports: the set lasts as long as its
// shortest member.
func earliest(rows []sqlstore.LeaseRow) sqlstore.LeaseRow {
	e := rows[0]
	for _, r := range rows[1:] {
		if r.ExpiresAt.Before(e.ExpiresAt) {
			e.ExpiresAt = r.ExpiresAt
		}
		if r.Now.After(e.Now) {
			e.Now = r.Now
		}
	}
	return e
}
