package gate

import (
	"errors"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// ErrStaleFence is matched (errors.Is) by *StaleFenceError, returned by
// Gate.Commit, Gate.Do and Gate.Admit when a token's fence is below the
// resource's floor.
var ErrStaleFence = errors.New("fencegate: stale fence")

// ErrFenceNotIssued is matched (errors.Is) by the *StaleFenceError that
// Gate.Commit, Gate.Admit and pgxgate.CommitBatch return, under
// Options.VerifyIssued, for a fence the co-located coordinator never issued
// to that holder for that resource (forged, mistyped, or made up). The floor
// is not raised.
var ErrFenceNotIssued = errors.New("fencegate: fence was never issued for this resource and holder")

// ErrNestedTx is returned (wrapped) by Gate.Commit and pgxgate.CommitBatch
// for a pgx savepoint (pgx.Tx.Begin on a transaction): a refusal could roll
// back only the savepoint, and the outer transaction would commit its
// writes. Nothing runs; pass the outermost transaction. It is
// sqlstore.ErrNestedTx, which the pgx driver's pipeline returns.
var ErrNestedTx = sqlstore.ErrNestedTx

// StaleFenceError is the refusal of a token by the gate. The transaction the
// token was presented in has been rolled back, so none of its writes commit,
// and the refusal is in the rejection log under Seq.
//
// It matches ErrStaleFence, and also ErrFenceNotIssued when NotIssued is set.
type StaleFenceError struct {
	Resource    string    // the guarded resource
	Holder      string    // the refused holder
	Fence       int64     // the refused fence
	FloorHolder string    // who raised the floor to its current value
	Floor       int64     // the resource's floor when the token was refused
	NotIssued   bool      // the fence was never issued to Holder (Options.VerifyIssued)
	Seq         int64     // the refusal's sequence number in the rejection log
	At          time.Time // when the refusal was logged, in the database's clock
}

// Error names the resource, both holders, both fences and the rejection's
// sequence number.
func (e *StaleFenceError) Error() string {
	if e.NotIssued {
		return fmt.Sprintf("fencegate: %s: fence %d was never issued to %q (floor %d held by %q; rejection #%d)",
			e.Resource, e.Fence, e.Holder, e.Floor, e.FloorHolder, e.Seq)
	}
	return fmt.Sprintf("fencegate: %s: stale fence %d from %q is below floor %d from %q (rejection #%d)",
		e.Resource, e.Fence, e.Holder, e.Floor, e.FloorHolder, e.Seq)
}

// Is makes errors.Is match ErrStaleFence, and ErrFenceNotIssued for a fence
// that was never issued.
func (e *StaleFenceError) Is(target error) bool {
	return target == ErrStaleFence || (e.NotIssued && target == ErrFenceNotIssued)
}

// ErrNotCovered is matched (errors.Is) by the error Gate.CommitFile returns
// for a file that the token's claim does not cover: no member is the file
// or a directory above it. The error names the file and what the token
// claims; the transaction is rolled back and nothing is written.
var ErrNotCovered = errors.New("fencegate: the token's claim does not cover this file")
