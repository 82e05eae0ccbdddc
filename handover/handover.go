package handover

import (
	"context"
	"fmt"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
)

// Do is the last write of a lease's holder and its release in one
// transaction, which also grants the resource to its first live waiter:
// it runs fn in a transaction fenced by l's token (g.Do: g.Commit first,
// then fn, retried as g.Do retries, so fn must be safe to run again), then,
// in the same transaction, releases l and, when the resource's first live
// waiter is a lease.Coordinator.AcquireWait of one plain resource, grants it a new
// generation (sqlstore.Executor.LeaseHandOver), and commits. The write,
// the release and the grant commit together or not at all: a turn of a
// contended lock costs one durable commit instead of two (the release's
// and the next grant's). On success l is marked released (lease.Client.Release)
// and the waiter is woken: on Postgres by the commit's announcement,
// wherever it waits; elsewhere at once when it waits in c, and at its
// next touch otherwise.
//
// g and c must share one database (a gate and a coordinator over the
// same schema). l must be a lease of one plain resource: a set's or a
// path's is refused (fence.ErrInvalidInput); release those with
// lease.Client.Release and lease.Coordinator.Release.
//
// The waiter's first term is dated from its last touch of its place and
// lasts the term it asked for, but no longer than its place would have
// (lease.CoordinatorOptions.WaiterTTL after that touch): package lease's doc, "Hand-over", has the
// proof that its holder's deadline stays inside the coordinator's, and
// the bound on a waiter that died waiting.
//
// Errors: g.Do's (a refused token, fn's error, the database's), with
// nothing committed and l untouched; an error of the commit itself may
// leave its outcome unknown, and l is then still the caller's to release.
func Do[TTx any](ctx context.Context, g *gate.Gate[TTx], c *lease.Coordinator, l *lease.Lease, fn func(ctx context.Context, tx TTx) error) (lease.HandOver, error) {
	if l == nil || g == nil || c == nil {
		return lease.HandOver{}, invalid("hand-over", "needs a gate, a coordinator and a lease")
	}
	token := l.Token()
	if token.IsSet() || fence.IsPath(token.Resource) {
		return lease.HandOver{}, invalid("lease", "a hand-over takes a lease of one plain resource; release %s with Release", token.Name())
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
		return lease.HandOver{}, err
	}
	return c.EndHandOver(l, res)
}

// invalid is refused input, as fence returns it.
func invalid(field, format string, args ...any) error {
	return &fence.InvalidInputError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
