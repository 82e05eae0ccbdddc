// Package handover ends a lease with its holder's last write: the write,
// the lease's release and the grant of the resource to its first live
// waiter commit in one transaction, so that a turn of a contended lock
// costs one durable commit where a release and the next acquisition cost
// two.
//
// It needs both a gate (the fenced write) and a lease coordinator (the
// lease ended on the holder's side, the waiter woken), so it lives apart
// from both: Do over any driver, CommitBatch pipelined on pgx.
//
//	off, err := handover.Do(ctx, g, coord, l, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `INSERT INTO deploys VALUES ('v2')`)
//		return err
//	})
//
// The waiter, an AcquireWait of one plain resource, never sends the
// acquisition that grants it; package lease's doc, "Hand-over", says how
// it learns of the grant, how its first term is dated, and why its
// deadline stays inside the coordinator's.
package handover
