package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/sqlstore"
)

// HandOff is what DoHandOver did with the lease, its write committed.
type HandOff struct {
	// Released is true when the lease was live and is now released or
	// handed over. False when it had expired or been released before: the
	// write committed all the same (its fence was admitted), and nothing
	// else changed.
	Released bool
	// To is the holder the resource was handed to, and Fence its new
	// fence; "" and 0 when no waiter took it (none waited, or the first
	// takes no hand-over): the lease was released as Release releases it.
	To    string
	Fence int64
}

// DoHandOver is the last write of a lease's holder and its release in one
// transaction, which also grants the resource to its first live waiter:
// it runs fn in a transaction fenced by l's token (g.Do: g.Commit first,
// then fn, retried as g.Do retries, so fn must be safe to run again), then,
// in the same transaction, releases l and, when the resource's first live
// waiter is an AcquireWait of one plain resource, grants it a new
// generation (sqlstore.Executor.LeaseHandOver), and commits. The write,
// the release and the grant commit together or not at all: a turn of a
// contended lock costs one durable commit instead of two (the release's
// and the next grant's). On success l is marked released (Client.Release)
// and the waiter is woken: on Postgres by the commit's announcement,
// wherever it waits; elsewhere at once when it waits in c, and at its
// next touch otherwise.
//
// g and c must share one database (a gate and a coordinator over the
// same schema). l must be a lease of one plain resource: a set's or a
// path's is refused (gate.ErrInvalidInput); release those with Release.
//
// The waiter's first term is dated from its last touch of its place and
// lasts the term it asked for, but no longer than its place would have
// (WaiterTTL after that touch): package lease's doc, "Hand-over", has the
// proof that its holder's deadline stays inside the coordinator's, and
// the bound on a waiter that died waiting.
//
// Errors: g.Do's (a refused token, fn's error, the database's), with
// nothing committed and l untouched; an error of the commit itself may
// leave its outcome unknown, and l is then still the caller's to release.
func DoHandOver[TTx any](ctx context.Context, g *gate.Gate[TTx], c *Coordinator, l *Lease, fn func(ctx context.Context, tx TTx) error) (HandOff, error) {
	if l == nil || g == nil || c == nil {
		return HandOff{}, invalid("hand-over", "needs a gate, a coordinator and a lease")
	}
	token := l.Token()
	if token.IsSet() || gate.IsPath(token.Resource) {
		return HandOff{}, invalid("lease", "a hand-over takes a lease of one plain resource; release %s with Release", token.Name())
	}
	var res sqlstore.LeaseHandOverResult
	err := g.Do(ctx, token, func(ctx context.Context, tx TTx) error {
		if fn != nil {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		var err error
		res, err = g.Driver().UnwrapExecutor(tx).LeaseHandOver(ctx, &sqlstore.LeaseHandOverParams{
			Resource: token.Resource, Holder: token.Holder, Fence: token.Fence,
		})
		return err
	})
	if err != nil {
		return HandOff{}, err
	}
	return c.HandOffOf(l, res)
}

// HandOffOf is DoHandOver's ending for a hand-over the caller committed
// itself (pgxgate.CommitBatchHandOver): res is what the hand-over's
// statement answered, in the transaction that committed. It marks l
// released, wakes the waiter handed the resource if it waits in c, and
// says what happened.
func (c *Coordinator) HandOffOf(l *Lease, res sqlstore.LeaseHandOverResult) (HandOff, error) {
	if l == nil {
		return HandOff{}, invalid("lease", "is nil")
	}
	if _, err := l.client.Release(l); err != nil {
		return HandOff{}, err
	}
	resource := l.Token().Resource
	if !res.Released {
		return HandOff{}, nil
	}
	if res.Waiter == 0 {
		c.waits.announced(sqlstore.LeaseChange{Resource: resource})
		return HandOff{Released: true}, nil
	}
	c.waits.announced(sqlstore.LeaseChange{Resource: resource, First: res.Waiter, Granted: true, Lease: res.Lease})
	return HandOff{Released: true, To: res.Lease.Holder, Fence: res.Lease.Fence}, nil
}

// handedLease reads the resource's lease row and reports whether it is a
// live lease that a hand-over granted to hreq.
func (c *Coordinator) handedLease(ctx context.Context, hreq *AcquireRequest) (sqlstore.LeaseRow, bool, error) {
	row, err := c.store.Executor().LeaseGet(ctx, hreq.Resource)
	switch {
	case errors.Is(err, sqlstore.ErrNotFound):
		return sqlstore.LeaseRow{}, false, nil
	case err != nil:
		return sqlstore.LeaseRow{}, false, err
	}
	return row, row.Live() && row.RequestID == hreq.RequestID && row.Holder == hreq.Holder, nil
}

// handedOver reports the lease a hand-over granted to hreq (the request
// a waiter's place carries), or nil when the resource's live lease is not
// hreq's: the generation carried, when an announcement (or DoHandOver in
// this process) carried the one that names hreq, or else the lease row,
// read. The term is dated from the waiter's last touch (the generation's
// GrantedAt), and hreq is anchored at the send instant of the last touch
// the waiter saw kept: that touch ran before the hand-over read the
// place, or the hand-over would have found an older touch and the touch
// no place (kept false), so the anchor precedes the dating instant.
func (c *Coordinator) handedOver(ctx context.Context, client *Client, hreq *AcquireRequest, carried sqlstore.LeaseRow) (*Lease, error) {
	if hreq == nil {
		return nil, nil
	}
	row := carried
	if !row.Found || row.RequestID != hreq.RequestID || row.Resource != hreq.Resource {
		var ours bool
		var err error
		switch row, ours, err = c.handedLease(ctx, hreq); {
		case err != nil:
			return nil, c.wrap("read the hand-over of", hreq.Resource, err)
		case !ours:
			return nil, nil
		}
	}
	tick := c.store.ClockPrecision()
	return client.CompleteAcquire(hreq, Grant{
		Resource:             hreq.Resource,
		Holder:               hreq.Holder,
		Fence:                row.Fence,
		RequestID:            hreq.RequestID,
		TTL:                  max(row.ExpiresAt.Sub(row.GrantedAt)-tick, 0),
		CoordinatorExpiresAt: DBTime{row.ExpiresAt},
	})
}

// spendHandOver releases what a hand-over may have granted to hreq after
// its waiter gave up, once its place is out of the queue (no hand-over can
// grant it after that, and one that did has committed: the removal waited
// for its lock). nil when nothing is left held.
func (c *Coordinator) spendHandOver(ctx context.Context, hreq *AcquireRequest) error {
	if hreq == nil {
		return nil
	}
	row, ours, err := c.handedLease(ctx, hreq)
	switch {
	case err != nil:
		return fmt.Errorf("fencegate: read what a hand-over left to %s on %q: it may stay held until its first term ends (within %v): %w",
			hreq.Holder, hreq.Resource, c.waiterTTL, err)
	case !ours:
		return nil
	}
	if _, err := c.Release(ctx, gate.Token{Resource: row.Resource, Holder: row.Holder, Fence: row.Fence}); err != nil {
		return fmt.Errorf("fencegate: release the hand-over to %s of %q: it may stay held until its first term ends (within %v): %w",
			hreq.Holder, hreq.Resource, c.waiterTTL, err)
	}
	return nil
}
