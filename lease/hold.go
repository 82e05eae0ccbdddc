package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/fence"
)

// Hold acquires resource for c's holder, runs fn while keeping the lease
// alive, and releases the lease when fn returns. It is the shape for long
// work: a deploy, a migration, an agent's tool loop.
//
// While fn runs, Hold renews the lease in the background once a third of the
// term has passed (when two thirds remain), so a failed renewal has two
// thirds of the term to be retried (every tenth of it). One goroutine per
// Client renews all the leases it holds through Hold, in one batch per
// Coordinator (Coordinator.RenewBatch) for all that are due: a lease may be
// renewed up to a twelfth of its term early to share a batch, and its first
// renewal up to a sixth of its term early, at random, so that leases taken
// together do not all fall due together. fn's context is cancelled,
// with a *LostError cause (errors.Is(context.Cause(ctx), ErrLeaseLost)), the
// moment the lease can no longer be trusted: the coordinator reports it
// expired, released or superseded, or the holder's deadline arrives before a
// renewal succeeded. Cancellation is a signal, not a guard: a write already
// past its check may still land late, so fn must put every write behind
// gate.Commit with l.Token(). Renewals keep the fence, so the token stays
// valid for the whole call; l's deadline moves with each renewal.
//
// If the resource is held, Hold returns a *HeldError (matching ErrHeld)
// without calling fn; with the Wait option it waits its turn instead
// (Coordinator.AcquireWait), until ctx ends. An acquisition whose outcome is
// unknown (ctx ended while it was out, or its reply was lost) returns its
// error without calling fn, having released what it may have been granted,
// as AcquireWait does. Otherwise it returns fn's error, joined with the
// *LostError if the lease was lost (replacing a bare context.Canceled), and
// with any error from releasing the lease (which then expires by itself). If
// fn returns nil, the lease's loss is not reported: fn finished, and the gate
// already judged each of its writes. The release runs even when ctx is
// cancelled, so a cancelled Hold still frees the resource promptly, but no
// longer than ClientOptions.ReleaseTimeout: when the coordinator does not
// answer, Hold returns, and its error says the lease may not have been
// released.
//
// Hold's timers run on the process's clock; when one fires, the deadline is
// checked again on the Client's clock. With a clock.Manual that is not
// advanced, the lease is therefore never lost by its deadline: tests of
// expiry should use real time, or the Client and Coordinator directly.
func Hold(ctx context.Context, c *Client, coord *Coordinator, resource string, fn func(ctx context.Context, l *Lease) error, opts ...HoldOption) error {
	if err := fence.ValidateResource(resource); err != nil {
		return err
	}
	return hold(ctx, c, coord, []string{resource}, fn, opts)
}

// hold is Hold for a claim of members (sorted, valid).
func hold(ctx context.Context, c *Client, coord *Coordinator, members []string, fn func(ctx context.Context, l *Lease) error, opts []HoldOption) error {
	l, err := holdAcquire(ctx, c, coord, members, opts)
	if err != nil {
		return err
	}

	kept, err := Keep(ctx, c, coord, l)
	if err != nil {
		return err // born expired: never start the work
	}
	defer kept.stop() // also if fn panics
	fnErr := fn(kept.Context(), l)
	kept.stop() // from here on, the lease cannot be reported lost

	if lost := kept.lost(); lost != nil {
		switch {
		case fnErr == nil:
			// fn finished its work; its gated writes were judged by the gate.
		case errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, ErrLeaseLost):
			fnErr = lost
		default:
			fnErr = errors.Join(lost, fnErr)
		}
	}

	if err := kept.Release(ctx); err != nil {
		return errors.Join(fnErr, err)
	}
	return fnErr
}

// Release releases l, which c acquired from coord: c stops counting on it
// (Client.Release) and coord releases its token (Coordinator.Release), even
// when ctx is cancelled, but no longer than ClientOptions.ReleaseTimeout, as
// Kept.Release and the end of Hold do. Releasing twice is harmless (the
// second is a no-op, as a stale release is). Errors: fence.ErrInvalidInput
// for a lease that is not c's (nothing is released); otherwise its error says
// that the lease may not have been released: it then expires at the end of
// its term.
func Release(ctx context.Context, c *Client, coord *Coordinator, l *Lease) error {
	token, err := c.Release(l)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(releasing(ctx, l)), c.releaseTimeout)
	defer cancel()
	if _, err := coord.Release(rctx, token); err != nil {
		// err already says "fencegate: release …"; add only what it means.
		return fmt.Errorf("%w (the lease may not have been released; it expires by itself at the end of its term)", err)
	}
	return nil
}
