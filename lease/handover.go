package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/sqlstore"
)

// HandOver is what a hand-over (handover.Do, handover.CommitBatch) did
// with the lease, its write committed.
type HandOver struct {
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

// EndHandOver ends a hand-over on the holder's side once the caller has
// committed it (handover.Do and handover.CommitBatch call it): res is what
// the hand-over's statement answered, in the transaction that committed. It marks l
// released, wakes the waiter handed the resource if it waits in c, and
// says what happened.
func (c *Coordinator) EndHandOver(l *Lease, res sqlstore.LeaseHandOverResult) (HandOver, error) {
	if l == nil {
		return HandOver{}, invalid("lease", "is nil")
	}
	if _, err := l.client.Release(l); err != nil {
		return HandOver{}, err
	}
	resource := l.Token().Resource
	if !res.Released {
		return HandOver{}, nil
	}
	if res.Waiter == 0 {
		c.waits.announced(sqlstore.LeaseChange{Resource: resource})
		return HandOver{Released: true}, nil
	}
	c.waits.announced(sqlstore.LeaseChange{Resource: resource, First: res.Waiter, Granted: true, Lease: res.Lease})
	return HandOver{Released: true, To: res.Lease.Holder, Fence: res.Lease.Fence}, nil
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
// hreq's: the generation carried, when an announcement (or handover.Do in
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
		CoordinatorExpiresAt: clock.NewDBTime(row.ExpiresAt),
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
	if _, err := c.Release(ctx, fence.Token{Resource: row.Resource, Holder: row.Holder, Fence: row.Fence}); err != nil {
		return fmt.Errorf("fencegate: release the hand-over to %s of %q: it may stay held until its first term ends (within %v): %w",
			hreq.Holder, hreq.Resource, c.waiterTTL, err)
	}
	return nil
}
