package handover

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/fence"
	"github.com/fencegate/fencegate/gate"
	"github.com/fencegate/fencegate/gate/pgxgate"
	"github.com/fencegate/fencegate/lease"
	"github.com/fencegate/fencegate/sqlstore"
	"github.com/fencegate/fencegate/sqlstore/pgxv5"
)

// CommitBatch is pgxgate.CommitBatch for a lease's last write: it queues
// the hand-over of l (pgxv5.QueueHandOver) last in b, so that the fence,
// b's writes, l's release and the grant of the resource to its first live
// waiter go in one round trip and commit together, then ends l on the
// holder's side (lease.Coordinator.EndHandOver: l marked released, a waiter
// of c woken). Errors are pgxgate.CommitBatch's, with l left as it was; a set's or
// a path's lease is refused (fence.ErrInvalidInput), as Do refuses it.
func CommitBatch(ctx context.Context, g *gate.Gate[pgx.Tx], conn pgxgate.BatchSender, c *lease.Coordinator, l *lease.Lease, b *pgx.Batch) (lease.HandOver, error) {
	if l == nil || c == nil {
		return lease.HandOver{}, fmt.Errorf("fencegate: commit batch with a hand-over: %w: needs a coordinator and a lease", fence.ErrInvalidInput)
	}
	token := l.Token()
	if token.IsSet() || fence.IsPath(token.Resource) {
		return lease.HandOver{}, fmt.Errorf("fencegate: commit batch with a hand-over of %s: %w: a hand-over takes a lease of one plain resource", token, fence.ErrInvalidInput)
	}
	var res sqlstore.LeaseHandOverResult
	pgxv5.QueueHandOver(b, sqlstore.LeaseHandOverParams{Resource: token.Resource, Holder: token.Holder, Fence: token.Fence}, &res)
	if err := pgxgate.CommitBatch(ctx, g, conn, token, b); err != nil {
		return lease.HandOver{}, err
	}
	return c.EndHandOver(l, res)
}
