package lease

import (
	"context"
	"errors"
	"sync"
)

// Kept is a lease kept alive by its Client's keeper, without a goroutine of
// its own: the shape for a process holding thousands of leases. Keep
// returns one; Hold is built on it.
//
// Its methods are safe for concurrent use. A Kept must come from Keep: the
// zero value is not usable.
type Kept struct {
	entry kept // coord, lease (and so Client), context; guarded by the Client's keeper

	once       sync.Once
	releaseErr error
}

// Keep keeps l, acquired by c from coord, alive: c's keeper renews it with
// every other lease c keeps, in one batch per Coordinator per tick (see
// Hold for the schedule), until Release, until the lease is lost, or until
// ctx ends.
//
// Kept.Context is derived from ctx and is cancelled with a *LostError cause
// (errors.Is(context.Cause(ctx), ErrLeaseLost)) the moment the lease can no
// longer be trusted: the coordinator reports it expired, released or
// superseded, or the holder's deadline arrives before a renewal succeeded.
// As with Hold, cancellation is a signal, not a guard: put every write
// behind gate.Commit with the lease's token. When ctx ends, the lease is no
// longer renewed and expires at the end of its term unless released; call
// Release in every case.
//
// Keep returns a *LostError, and releases l, if l has no time left; an
// error if l is not c's or already released.
func Keep(ctx context.Context, c *Client, coord *Coordinator, l *Lease) (*Kept, error) {
	if l == nil || l.client != c {
		return nil, errors.New("fencegate: Keep: the lease was not acquired by this Client")
	}
	if l.isReleased() {
		return nil, errors.New("fencegate: Keep: the lease is already released")
	}
	if l.Expired() {
		// Born expired (a retried grant with almost no time left, or a clock
		// skew as long as the term): never report it as held.
		lost := &LostError{Resource: l.token.Name(), Fence: l.token.Fence, Reason: "it had no time left when granted"}
		coord.obs.lose(ctx, l, "born_expired")
		return nil, errors.Join(lost, Release(ctx, c, coord, l))
	}
	k := &Kept{entry: kept{l: l, coord: coord}}
	k.entry.ctx, k.entry.lose = context.WithCancelCause(ctx)
	c.keeper.add(&k.entry)
	return k, nil
}

// Lease returns the kept lease; its deadline moves with each renewal, its
// token does not change.
func (k *Kept) Lease() *Lease { return k.entry.l }

// Context returns a context cancelled with a *LostError cause when the
// lease is lost, or when Keep's ctx ends or Release is called.
func (k *Kept) Context() context.Context { return k.entry.ctx }

// Release stops renewing the lease and releases it at the coordinator, even
// when ctx is cancelled, but no longer than ClientOptions.ReleaseTimeout.
// It is idempotent: later calls return the first call's result. After a
// loss it still releases (the coordinator answers that the lease is no
// longer held, which is not an error).
func (k *Kept) Release(ctx context.Context) error {
	k.once.Do(func() {
		k.stop()
		if k.lost() == nil { // a loss was counted when it happened
			k.entry.coord.obs.held(ctx, k.entry.l, "released")
		}
		k.releaseErr = Release(ctx, k.entry.l.client, k.entry.coord, k.entry.l)
	})
	return k.releaseErr
}

// stop ends the renewals and cancels Context (keeping a *LostError cause
// set before). Safe to call more than once.
func (k *Kept) stop() {
	k.entry.l.client.keeper.drop(&k.entry) // from here on the keeper never calls lose
	k.entry.lose(nil)
}

// lost returns the *LostError the lease was lost with, or nil.
func (k *Kept) lost() *LostError {
	var lost *LostError
	if errors.As(context.Cause(k.entry.ctx), &lost) {
		return lost
	}
	return nil
}
