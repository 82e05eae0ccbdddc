package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// PruneOptions says what Coordinator.Prune deletes. The zero value prunes
// request rows older than the coordinator's MaxTTL plus PruneMargin and
// expired waiter rows, in batches of 1000, and keeps every rejection.
type PruneOptions struct {
	// RequestAge overrides how old a request row must be to go. It must be
	// at least the longest term any coordinator of the database grants
	// (each one's MaxTTL) plus the drift ClientOptions.ClockSkew allows
	// over that term: a shorter age is refused. 0: this coordinator's
	// MaxTTL plus PruneMargin.
	RequestAge time.Duration
	// KeepRejections, when above 0, deletes all but the newest
	// KeepRejections rows of the rejection log (gate.Gate.Rejections).
	// Floors are never pruned: a deleted floor would let a fence below it
	// in again.
	KeepRejections int64
	// BatchSize is the most rows deleted from a table per statement
	// (0: 1000), so that no statement holds many row locks or runs long.
	BatchSize int
}

// PruneMargin is what Prune adds to MaxTTL by default: a request could be
// sent up to ClockSkew's share of its term before the database dated its
// row (the holder's and the database's clocks drift apart), and a minute
// covers any ClockSkew up to 4% of a 24-hour term.
const PruneMargin = time.Minute

// PruneResult counts what Prune deleted.
type PruneResult struct {
	Requests, Waiters, Rejections int64
}

// Prune deletes rows of the coordinator's tables that can no longer be
// needed, batch by batch until a batch comes back short or ctx ends (the
// batches committed stay deleted): request rows older than opts.RequestAge,
// expired waiter rows, and with opts.KeepRejections the older rejections.
// It never touches floors or leases.
//
// Why an old request row can go: a request row exists so that a late
// retry of a request whose lease is over is refused (ErrRequestExpired),
// not granted a second time. A retry is sent by a Client with its first
// sending's instant (AcquireRequest.SentAt), and a Coordinator in that
// process refuses, before it asks the database, a retry whose first
// sending is more than its term ago: its holder would date the lease from
// that instant, so the lease is already over when it arrives. The row was
// made after the first sending, so once the row is older than the longest
// term (plus the clocks' drift over it, PruneMargin), every retry of it is
// refused that way, and the row is not needed. A retry that carries no
// send instant (an AcquireRequest decoded from the wire, which no Client
// of this process began) is judged by its row alone: after pruning it is
// granted a fresh lease, which its holder's CompleteAcquire dates from its
// first sending, already past (the holder never writes with it, and the
// lease ends with its term). Waiter rows: an expired one is out of the
// queue already (AcquireWait queues again when it finds its place gone).
//
// Errors: fence.ErrInvalidInput for a RequestAge below MaxTTL or a negative
// option; the database's error.
func (c *Coordinator) Prune(ctx context.Context, opts PruneOptions) (PruneResult, error) {
	age := opts.RequestAge
	if age == 0 {
		age = c.maxTTL + PruneMargin
	}
	switch {
	case age < c.maxTTL:
		return PruneResult{}, invalid("RequestAge", "%v is below the coordinator's MaxTTL of %v: a retry of a younger request could still need its row", age, c.maxTTL)
	case opts.KeepRejections < 0:
		return PruneResult{}, invalid("KeepRejections", "%d is negative", opts.KeepRejections)
	case opts.BatchSize < 0:
		return PruneResult{}, invalid("BatchSize", "%d is negative", opts.BatchSize)
	}
	batch := opts.BatchSize
	if batch == 0 {
		batch = 1000
	}
	p := sqlstore.PruneParams{RequestAge: age, Waiters: true, RejectionKeep: opts.KeepRejections, Limit: batch}
	var out PruneResult
	for {
		if err := ctx.Err(); err != nil {
			return out, context.Cause(ctx)
		}
		res, err := c.store.Executor().Prune(ctx, &p)
		out.Requests += res.Requests
		out.Waiters += res.Waiters
		out.Rejections += res.Rejections
		if err != nil {
			return out, fmt.Errorf("lease: prune: %w", err)
		}
		full := int64(batch)
		if res.Requests < full {
			p.RequestAge = 0
		}
		if res.Waiters < full {
			p.Waiters = false
		}
		if res.Rejections < full {
			p.RejectionKeep = 0
		}
		if p.RequestAge == 0 && !p.Waiters && p.RejectionKeep == 0 {
			return out, nil
		}
	}
}

// lateRetry reports whether req is a retry whose first sending is more than
// ttl ago on its holder's clock: a grant could only be over on arrival.
// A request no Client of this process began carries no send instant.
func lateRetry(req *AcquireRequest, ttl time.Duration) bool {
	if req.client == nil || !req.sent() {
		return false
	}
	return req.client.clock.Now().Sub(req.SentAt()) > ttl
}
