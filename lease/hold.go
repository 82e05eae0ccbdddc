package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Hold acquires resource for c's holder, runs fn while keeping the lease
// alive, and releases the lease when fn returns. It is the shape for long
// work: a deploy, a migration, an agent's tool loop.
//
// While fn runs, Hold renews the lease in the background once a third of the
// term has passed (when two thirds remain), so a failed renewal has two
// thirds of the term to be retried (every tenth of it). fn's context is cancelled,
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
// (Coordinator.AcquireWait), until ctx ends. Otherwise it returns fn's error, joined with the
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
// checked again on the Client's clock. With a ManualClock that is not
// advanced, the lease is therefore never lost by its deadline: tests of
// expiry should use real time, or the Client and Coordinator directly.
func Hold(ctx context.Context, c *Client, coord *Coordinator, resource string, fn func(ctx context.Context, l *Lease) error, opts ...HoldOption) error {
	l, err := holdAcquire(ctx, c, coord, resource, opts)
	if err != nil {
		return err
	}

	if l.Expired() {
		// Born expired (a retried grant with almost no time left, or a clock
		// skew as long as the term): never start the work.
		lost := &LostError{Resource: resource, Fence: l.Token().Fence, Reason: "it had no time left when granted"}
		return errors.Join(lost, release(ctx, c, coord, l))
	}

	workCtx, lose := context.WithCancelCause(ctx)
	defer lose(nil)
	keeperCtx, stopKeeper := context.WithCancel(workCtx)
	keeperDone := make(chan struct{})
	go func() {
		defer close(keeperDone)
		keep(keeperCtx, c, coord, l, lose)
	}()

	fnErr := fn(workCtx, l)
	stopKeeper()
	<-keeperDone

	var lost *LostError
	if errors.As(context.Cause(workCtx), &lost) {
		switch {
		case fnErr == nil:
			// fn finished its work; its gated writes were judged by the gate.
		case errors.Is(fnErr, context.Canceled) || errors.Is(fnErr, ErrLeaseLost):
			fnErr = lost
		default:
			fnErr = errors.Join(lost, fnErr)
		}
	}

	if err := release(ctx, c, coord, l); err != nil {
		return errors.Join(fnErr, err)
	}
	return fnErr
}

// release releases l at the coordinator, even when ctx is cancelled, but no
// longer than the Client's ReleaseTimeout.
func release(ctx context.Context, c *Client, coord *Coordinator, l *Lease) error {
	token, _ := c.Release(l) // cannot fail: l is c's
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.releaseTimeout)
	defer cancel()
	if _, err := coord.Release(rctx, token); err != nil {
		// err already says "lease: release …"; add only what it means.
		return fmt.Errorf("%w (the lease may not have been released; it expires by itself at the end of its term)", err)
	}
	return nil
}

// keep renews l until ctx ends, and calls lose once l can no longer be
// trusted. Renewals run in their own goroutine so that the deadline timer
// still fires while a renewal is stuck in the database.
func keep(ctx context.Context, c *Client, coord *Coordinator, l *Lease, lose context.CancelCauseFunc) {
	type result struct {
		req *RenewRequest
		out RenewOutcome
		err error
	}
	results := make(chan result, 1)
	inFlight := false
	defer func() {
		if inFlight {
			<-results // ctx is done, so the renewal returns promptly
		}
	}()

	lost := func(reason string, err error) {
		lose(&LostError{Resource: l.token.Resource, Fence: l.token.Fence, Reason: reason, Err: err})
	}

	deadline := time.NewTimer(l.Remaining())
	defer deadline.Stop()
	renew := time.NewTimer(renewWait(l))
	defer renew.Stop()
	var lastErr error // the last failed renewal, for the LostError
	for {
		select {
		case <-ctx.Done():
			return

		case <-deadline.C:
			if rem := l.Remaining(); rem > 0 {
				deadline.Reset(rem) // the deadline moved, or the clock is not the process's
				continue
			}
			lost("its deadline passed without a successful renewal", lastErr)
			return

		case <-renew.C:
			if inFlight {
				continue
			}
			req, err := c.BeginRenewal(l)
			if err != nil {
				lost("it could not be renewed", err)
				return
			}
			inFlight = true
			go func() {
				out, err := coord.Renew(ctx, req)
				results <- result{req, out, err}
			}()

		case r := <-results:
			inFlight = false
			if r.err != nil {
				// Maybe a blip: retry soon, while the deadline timer
				// guards the lease.
				lastErr = r.err
				renew.Reset(retryWait(l))
				continue
			}
			if !r.out.OK {
				lost("the coordinator reports it expired, released or superseded", nil)
				return
			}
			if _, err := c.CompleteRenewal(r.req, r.out.Grant); err != nil {
				lost("its renewal could not be completed", err)
				return
			}
			lastErr = nil
			deadline.Reset(l.Remaining())
			renew.Reset(renewWait(l))
		}
	}
}

// renewWait is how long until l should be renewed: when two thirds of its
// term remain.
func renewWait(l *Lease) time.Duration {
	return max(l.Remaining()-2*l.Grant().TTL/3, 0)
}

// retryWait is the pause after a failed renewal: a tenth of the term, so
// several attempts fit before the deadline.
func retryWait(l *Lease) time.Duration {
	return max(l.Grant().TTL/10, time.Millisecond)
}
