package lease

import (
	"errors"
	"fmt"
	"time"
)

// ErrRequestUsed is returned by Client.CompleteAcquire and
// Client.CompleteRenewal for a request that was already completed. Requests
// are single-use: a grant can be turned into a lease once.
var ErrRequestUsed = errors.New("fencegate: request already completed")

// ErrGrantMismatch is returned (wrapped, with the differing field) by
// Client.CompleteAcquire and Client.CompleteRenewal when the grant answers a
// different request: another resource, holder, fence or request id.
var ErrGrantMismatch = errors.New("fencegate: grant does not answer this request")

// ErrReleased is returned by Client.BeginRenewal and Client.CompleteRenewal
// for a lease the Client has released.
var ErrReleased = errors.New("fencegate: lease was released")

// ErrUnknownResource is returned (wrapped) by Coordinator.Renew for a
// resource that was never leased.
var ErrUnknownResource = errors.New("fencegate: resource was never leased")

// ErrFloorAhead is returned (wrapped) by Coordinator.Acquire when the gate's
// floor for the resource is above the next fence from the sequence: some
// other fence source raised it. Nothing is granted; set
// CoordinatorOptions.StartFence above the floor.
var ErrFloorAhead = errors.New("fencegate: the resource's floor is ahead of the fence sequence")

// ErrRequestExpired is returned (wrapped, with the lease's fence) by
// Coordinator.Acquire, and so by Hold, for a request that already made a
// lease which has since expired or been released: a late retry. It is never
// granted again; begin a new request (Client.BeginAcquire).
var ErrRequestExpired = errors.New("fencegate: request already made a lease, which is over")

// ErrBusy is matched by the error Coordinator.Acquire, Renew and Release
// return when the database refused the work for now: a lock timeout (another
// transaction, such as the previous holder's write, holds a row the
// acquisition needs), a serialization failure, or SQLite's busy. Nothing was
// granted or changed; the same request may be sent again.
var ErrBusy = errors.New("fencegate: coordinator busy, retry")

// ErrLeaseLost is the cause (context.Cause) of the context Hold hands its
// callback when the lease can no longer be trusted, and is matched by the
// error Hold then returns. The concrete cause is a *LostError.
var ErrLeaseLost = errors.New("fencegate: lease lost")

// ErrHeld is matched by the *HeldError that Hold returns when the resource
// is held by someone else, or already by this holder, and that
// Coordinator.AcquireWait (and Hold with Wait) joins to ctx's error when a
// wait ends.
var ErrHeld = errors.New("fencegate: resource is held")

// HeldError is Hold's refusal to start: the coordinator denied the
// acquisition. It matches ErrHeld.
type HeldError struct {
	Resource    string
	HeldBy      string        // the current holder
	Fence       int64         // the current holder's fence
	RetryAfter  time.Duration // when the current lease expires unless renewed
	AlreadyHeld bool          // the requesting holder holds it already
	// Queued is true when the resource was free but other waiters were
	// ahead in its queue as a wait (AcquireWait) ended; HeldBy and Fence
	// then name the last holder.
	Queued bool
}

// Error names the holder and when the resource frees.
func (e *HeldError) Error() string {
	if e.AlreadyHeld {
		return fmt.Sprintf("fencegate: %s: already held by this holder %q (fence %d)", e.Resource, e.HeldBy, e.Fence)
	}
	if e.Queued {
		return fmt.Sprintf("fencegate: %s: free, but other waiters are ahead in its queue", e.Resource)
	}
	return fmt.Sprintf("fencegate: %s: held by %q (fence %d), free in at most %v", e.Resource, e.HeldBy, e.Fence, e.RetryAfter)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// LostError says why Hold stopped trusting a lease. It matches ErrLeaseLost.
type LostError struct {
	Resource string
	Fence    int64
	Reason   string // "the coordinator reports it expired", "deadline passed without a renewal", ...
	Err      error  // the last renewal error, if any
}

// Error says which lease was lost and why.
func (e *LostError) Error() string {
	msg := fmt.Sprintf("fencegate: %s: lease with fence %d lost: %s", e.Resource, e.Fence, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrLeaseLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }

// Unwrap returns the last renewal error, if any.
func (e *LostError) Unwrap() error { return e.Err }

// busyError wraps a retryable database error so that it matches both ErrBusy
// and the original error.
type busyError struct{ err error }

// Error leaves out ErrBusy's "fencegate: " prefix: Coordinator.wrap puts it in
// front, with the operation.
func (e *busyError) Error() string        { return "coordinator busy, retry: " + e.err.Error() }
func (e *busyError) Is(target error) bool { return target == ErrBusy }
func (e *busyError) Unwrap() error        { return e.err }

// ErrNotReleased is matched by the *ReleaseError that
// Coordinator.ReleaseStrict returns when the token named no live lease, so
// that nothing was released.
var ErrNotReleased = errors.New("fencegate: not released")

// ReleaseReason says why a release released nothing (ReleaseError.Reason).
// It is read after the release, from the resource's lease row: advisory,
// as Status, and stale as soon as it is read.
type ReleaseReason int

// The reasons a release released nothing.
const (
	// ReleaseExpired: the token's lease was not live when the release ran:
	// its term had ended (in the database's clock), and no one had taken
	// the resource since.
	ReleaseExpired ReleaseReason = iota + 1
	// ReleaseAlreadyReleased: the token's lease had been released already
	// (by an earlier release of the same token).
	ReleaseAlreadyReleased
	// ReleaseSuperseded: a newer generation (a higher fence) has been
	// granted on the resource since the token's lease; ReleaseError's
	// HeldBy and CurrentFence name it.
	ReleaseSuperseded
	// ReleaseNeverHeld: no lease the token names was ever granted: the
	// resource was never leased, or its lease with that fence belongs to
	// another holder, or the fence is above every fence the resource had.
	ReleaseNeverHeld
)

// String says the reason in words.
func (r ReleaseReason) String() string {
	switch r {
	case ReleaseExpired:
		return "the lease had expired"
	case ReleaseAlreadyReleased:
		return "the lease was released already"
	case ReleaseSuperseded:
		return "the lease was superseded by a newer one"
	case ReleaseNeverHeld:
		return "the token names no lease that was granted"
	}
	return fmt.Sprintf("ReleaseReason(%d)", int(r))
}

// ReleaseError says why Coordinator.ReleaseStrict released nothing: its
// Reason. It matches ErrNotReleased.
type ReleaseError struct {
	Resource string
	Holder   string // the token's
	Fence    int64  // the token's
	// Reason says why nothing was released.
	Reason ReleaseReason
	// HeldBy and CurrentFence describe the resource's latest generation
	// when the reason was read, live or not; empty for a resource that was
	// never leased.
	HeldBy       string
	CurrentFence int64
}

// Error names the token and the reason.
func (e *ReleaseError) Error() string {
	return fmt.Sprintf("fencegate: %s: release by %q of fence %d released nothing: %s",
		e.Resource, e.Holder, e.Fence, e.Reason)
}

// Is makes errors.Is(err, ErrNotReleased) true; the reason is the Reason
// field's, read through errors.As.
func (e *ReleaseError) Is(target error) bool { return target == ErrNotReleased }
