// Package steps is the lease rules written once, step by step, over the
// primitives of sqlstore.Executor, for what a driver's dialect does not
// state in SQL: SQLite's acquisitions and batch renewals, MySQL's set and
// path claims and batch renewals (MySQL acquires one resource by its
// migrations' fencegate_claim_one). Postgres states the same rules in its
// migrations' functions; the conformance table in sqlstore/sqlstoretest
// holds them all to the same answers.
package steps

import (
	"context"
	"errors"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// attempts bounds the retries of a first grant that loses the race to
// insert a resource's row to a concurrent acquisition, or whose read missed
// the row of one (the loser then reads the winner's lease and is denied, or
// answered the grant when it is a copy of the same request, so two attempts
// suffice).
const attempts = 3

// InTx runs fn in a new transaction of the executor's store, committing it
// when fn returns nil and rolling it back otherwise (sqlstore.Store.InTx).
type InTx func(ctx context.Context, fn func(sqlstore.Executor) error) error

// ErrFloorMoved is the error of an acquisition in a caller's transaction
// whose floor was raised above the new fence by a concurrent transaction
// after the acquisition checked it, with the grant already written: the
// caller must roll its transaction back.
var ErrFloorMoved = errors.New("the floor moved above the new fence after the grant was written; roll the transaction back")

// Acquire runs sqlstore.Executor.LeaseAcquire's rules. With inTx (an
// executor on its own) the steps run in a transaction of their own, rolled
// back when the floor is ahead; with nil, ex is in the caller's
// transaction, and the floor is checked before anything is written.
func Acquire(ctx context.Context, ex sqlstore.Executor, inTx InTx, p *sqlstore.LeaseAcquireParams) (sqlstore.LeaseAcquireResult, error) {
	if len(p.Members) == 0 && fence.IsPath(p.Resource) {
		// A path is acquired under the path rule whoever asks: a copy, so
		// that the caller's params stay as they were.
		q := *p
		q.Members = []string{p.Resource}
		p = &q
	}
	if len(p.Members) > 0 {
		return acquireSet(ctx, ex, inTx, p)
	}
	if inTx == nil {
		sending(p.Sending)
		res, err := acquire(ctx, ex, p, true)
		if errors.As(err, new(*floorAheadError)) {
			return sqlstore.LeaseAcquireResult{}, ErrFloorMoved
		}
		return res, err
	}
	var res sqlstore.LeaseAcquireResult
	err := inTx(ctx, func(ex sqlstore.Executor) error {
		sending(p.Sending) // the transaction has begun: its statements go out now
		var err error
		res, err = acquire(ctx, ex, p, false)
		return err
	})
	if ahead, ok := errors.AsType[*floorAheadError](err); ok {
		return ahead.res, nil // rolled back: nothing was written
	}
	return res, err
}

func sending(f func()) {
	if f != nil {
		f()
	}
}

// acquire is the acquisition's steps, one statement each, in ex's
// transaction. With checkFloor the floor is read before the grant is
// written, for a transaction that cannot be rolled back here.
func acquire(ctx context.Context, ex sqlstore.Executor, p *sqlstore.LeaseAcquireParams, checkFloor bool) (sqlstore.LeaseAcquireResult, error) {
	if err := ex.SetLockTimeout(ctx, p.LockTimeout); err != nil {
		return sqlstore.LeaseAcquireResult{}, err
	}
	for range attempts {
		row, err := ex.LeaseGetForUpdate(ctx, p.Resource)
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if row.Live() && row.Holder == p.Holder && row.RequestID == p.RequestID {
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRetried, Lease: row}, removeWaiter(ctx, ex, p.Waiter)
		}
		// The row's own generation, over, was this request's: the row is
		// its record until a new generation overwrites it (Postgres records
		// a generation's request only then).
		if ownOver(ex, row, p.RequestID) {
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: row.Fence}, nil
		}
		// Another holder sending this live lease's request id is told it
		// is held, below: the lease is neither its own nor over.
		if !row.Live() || row.RequestID != p.RequestID {
			fence, err := ex.RequestFence(ctx, p.Resource, p.RequestID)
			switch {
			case err != nil:
				return sqlstore.LeaseAcquireResult{}, err
			case fence != 0 && !row.Found:
				// The request's grant, with the lease row it created,
				// committed after the locking read found no row (READ
				// COMMITTED reads each statement anew): read it again.
				continue
			case fence != 0:
				return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireRequestExpired, Fence: fence}, nil
			}
		}
		if row.Live() {
			return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireHeld, Lease: row}, nil
		}

		// Free (never leased, expired or released): a new generation.
		fence, err := ex.FenceNext(ctx)
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if checkFloor {
			floor, err := ex.FloorGet(ctx, p.Resource)
			switch {
			case errors.Is(err, sqlstore.ErrNotFound):
			case err != nil:
				return sqlstore.LeaseAcquireResult{}, err
			case floor.Floor > fence:
				return sqlstore.LeaseAcquireResult{
					Status: sqlstore.AcquireFloorAhead, Fence: fence, Floor: floor.Floor, FloorHolder: floor.Holder,
				}, nil
			}
		}
		if err := recordOverwritten(ctx, ex, row); err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		granted, inserted, err := ex.LeaseGrant(ctx, &sqlstore.LeaseGrantParams{
			Resource:  p.Resource,
			Holder:    p.Holder,
			Fence:     fence,
			RequestID: p.RequestID,
			TTL:       p.TTL,
			Replace:   row.Found,
		})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !row.Found && !inserted {
			continue // a concurrent first acquisition created the row: read it
		}

		// Co-located mode: raise the gate's floor in this transaction, so
		// the grant and the refusal of every older fence commit together.
		floor, err := ex.FloorRaise(ctx, &sqlstore.FloorRaiseParams{
			Resource: p.Resource,
			Holder:   p.Holder,
			Fence:    fence,
		})
		if err != nil {
			return sqlstore.LeaseAcquireResult{}, err
		}
		if !floor.Admitted {
			// Roll the grant back: InTx commits only a nil error.
			return sqlstore.LeaseAcquireResult{}, &floorAheadError{sqlstore.LeaseAcquireResult{
				Status: sqlstore.AcquireFloorAhead, Fence: fence, Floor: floor.Floor, FloorHolder: floor.FloorHolder,
			}}
		}
		return sqlstore.LeaseAcquireResult{Status: sqlstore.AcquireGranted, Lease: granted}, removeWaiter(ctx, ex, p.Waiter)
	}
	return sqlstore.LeaseAcquireResult{}, errors.New("the lease row kept changing under a concurrent acquisition")
}

// RowRecords is implemented by an Executor whose store's own grants leave
// a generation's request recorded in its lease row alone until a new
// generation overwrites the row (Postgres's functions): the steps, run on
// such a store (a set, an abandon, the conformance table's stepwise run),
// then refuse a request from its row (ownOver) and record the request of
// a generation they overwrite (recordOverwritten). Elsewhere every grant
// records its request, and the steps send the statements they always did.
type RowRecords interface{ RequestInRow() bool }

func inRow(ex sqlstore.Executor) bool {
	r, ok := ex.(RowRecords)
	return ok && r.RequestInRow()
}

// ownOver reports whether row is a generation, over, that requestID made:
// the row is its record until it is overwritten.
func ownOver(ex sqlstore.Executor, row sqlstore.LeaseRow, requestID string) bool {
	return row.Found && !row.Live() && row.RequestID == requestID && inRow(ex)
}

// recordOverwritten records the request of the generation a grant is about
// to overwrite (row, locked), so that a late copy of it is refused once the
// row names another request. A row not found has nothing to record.
func recordOverwritten(ctx context.Context, ex sqlstore.Executor, row sqlstore.LeaseRow) error {
	if !row.Found || row.RequestID == "" || !inRow(ex) {
		return nil
	}
	return ex.RequestRecord(ctx, row.Resource, row.RequestID, row.Fence)
}

// removeWaiter takes a granted waiter's place out of the queue in the
// grant's transaction (none for 0).
func removeWaiter(ctx context.Context, ex sqlstore.Executor, waiter int64) error {
	if waiter == 0 {
		return nil
	}
	return ex.WaiterRemove(ctx, waiter)
}

// floorAheadError makes InTx roll back a grant whose floor raise was not
// admitted; Acquire turns it back into the result it carries.
type floorAheadError struct{ res sqlstore.LeaseAcquireResult }

func (e *floorAheadError) Error() string { return "the floor is ahead of the new fence" }

// RenewBatch runs sqlstore.Executor.LeaseRenewBatch's rules: one LeaseRenew
// per renewal, in one transaction (ex's own with a nil inTx). A lease named
// again answers Found false, as Postgres's one statement does.
func RenewBatch(ctx context.Context, ex sqlstore.Executor, inTx InTx, p *sqlstore.LeaseRenewBatchParams) ([]sqlstore.LeaseRow, error) {
	var rows []sqlstore.LeaseRow
	run := func(ex sqlstore.Executor) error {
		sending(p.Sending) // the transaction has begun: its statements go out now
		rows = make([]sqlstore.LeaseRow, len(p.Renewals))
		type key struct {
			resource, holder string
			fence            int64
		}
		seen := make(map[key]bool, len(p.Renewals))
		for i := range p.Renewals {
			r := &p.Renewals[i]
			k := key{r.Resource, r.Holder, r.Fence}
			if seen[k] {
				continue
			}
			seen[k] = true
			var err error
			if rows[i], err = ex.LeaseRenew(ctx, r); err != nil {
				return err
			}
		}
		return nil
	}
	if len(p.Renewals) == 0 {
		return []sqlstore.LeaseRow{}, nil
	}
	var err error
	if inTx == nil {
		err = run(ex)
	} else {
		err = inTx(ctx, run)
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}
