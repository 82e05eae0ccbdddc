package steps

import (
	"context"
	"errors"

	"github.com/fencegate/fencegate/sqlstore"
)

// HandOver runs sqlstore.Executor.LeaseHandOver's rules. With a nil inTx,
// ex is in the caller's transaction, where a hand-over belongs (the
// holder's last write is in it) and nothing here commits or rolls back;
// with inTx (an executor on its own) the steps run in a transaction of
// their own.
func HandOver(ctx context.Context, ex sqlstore.Executor, inTx InTx, p *sqlstore.LeaseHandOverParams) (sqlstore.LeaseHandOverResult, error) {
	if inTx == nil {
		return handOver(ctx, ex, p)
	}
	var res sqlstore.LeaseHandOverResult
	err := inTx(ctx, func(ex sqlstore.Executor) (err error) {
		res, err = handOver(ctx, ex, p)
		return err
	})
	return res, err
}

// handOver is HandOver's steps, one statement each, in ex's transaction.
func handOver(ctx context.Context, ex sqlstore.Executor, p *sqlstore.LeaseHandOverParams) (sqlstore.LeaseHandOverResult, error) {
	row, err := ex.LeaseGetForUpdate(ctx, p.Resource)
	if err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	if !row.Live() || row.Holder != p.Holder || row.Fence != p.Fence {
		return sqlstore.LeaseHandOverResult{}, nil
	}
	release := func() (sqlstore.LeaseHandOverResult, error) {
		res, err := ex.LeaseRelease(ctx, &sqlstore.LeaseReleaseParams{Resource: p.Resource, Holder: p.Holder, Fence: p.Fence})
		return sqlstore.LeaseHandOverResult{Released: res.Released}, err
	}
	w, found, err := ex.WaiterHead(ctx, p.Resource)
	if err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	if !found || w.RequestID == "" || w.TouchedAt.IsZero() {
		return release()
	}
	// The first term: from the last touch, for the term asked, and never
	// past the place's own expiry (the bound on a waiter that died).
	expires := w.TouchedAt.Add(w.Term)
	if w.ExpiresAt.Before(expires) {
		expires = w.ExpiresAt
	}
	if !expires.After(row.Now) {
		return release() // it would be born over
	}
	fence, err := ex.FenceNext(ctx)
	if err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	// The holder's write raised the floor to its fence in this
	// transaction; a floor above the new fence (AdvanceFences) would
	// refuse the grant: release instead, and let the waiter be told.
	switch floor, err := ex.FloorGet(ctx, p.Resource); {
	case errors.Is(err, sqlstore.ErrNotFound):
	case err != nil:
		return sqlstore.LeaseHandOverResult{}, err
	case floor.Floor > fence:
		return release()
	}
	if err := recordOverwritten(ctx, ex, row); err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	granted, _, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
		Resource: p.Resource, Holder: w.Holder, Fence: fence, RequestID: w.RequestID,
		Replace: true, GrantedAt: w.TouchedAt, ExpiresAt: expires,
	})
	if err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	if _, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{Resource: p.Resource, Holder: w.Holder, Fence: fence}); err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	if err := ex.WaiterRemove(ctx, w.Seq); err != nil {
		return sqlstore.LeaseHandOverResult{}, err
	}
	return sqlstore.LeaseHandOverResult{Released: true, Waiter: w.Seq, Lease: granted}, nil
}
