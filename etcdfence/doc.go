// Package etcdfence is etcd's lock made safe at the resource: a
// concurrency.Mutex whose acquisition returns a fencegate token that the
// gate has already admitted, so a holder that stalls past its session and
// wakes up after a successor was granted has its writes refused by the
// database, whatever it read before.
//
//	locker, _ := etcdfence.New(session, g, &etcdfence.Options{Epoch: 1})
//	lock, err := locker.Lock(ctx, "orders/42", "worker-1")
//	if err != nil {
//		return err // a *gate.StaleFenceError if a later grant got there first
//	}
//	defer lock.Unlock(ctx)
//	// read, then write in a transaction that starts with
//	// g.Commit(ctx, tx, lock.Token())
//
// # The fence
//
// The fence is the revision at which the lock's key was created (its
// CreateRevision), the number concurrency.Mutex itself compares to tell the
// owner. The owner at any revision is the live key under the lock's prefix
// with the lowest CreateRevision. If a key k1 owns the lock at revision R1
// and another key k2 owns it at a later revision R2, then k2 was created
// after k1: had k2 been created earlier, it would have been live at R1 as
// well (a key, once deleted, never comes back with its old CreateRevision;
// putting it again gives a new one), and k1 would not have been the lowest.
// Each revision is made by one write transaction and the Mutex puts its key
// in a transaction of its own, so no two keys share one. So the fences of
// successive grants of a resource are strictly increasing, in the order
// etcd granted them, and a session that locks again while it holds the lock
// gets the same key, so the same fence (admitted as equal). Nothing else may
// write keys under the lock's prefix.
//
// Revisions are durable: etcd commits each through its Raft log before it
// answers, and a restarted or failed-over cluster goes on from where it
// was. They restart at 1 only in a new cluster (a rebuild from nothing, not
// a restore of a snapshot, which keeps them).
//
// # The epoch
//
// A floor is never lowered, so the fences of a rebuilt cluster would all be
// refused. The fence is therefore composed with an epoch the operator bumps
// when the cluster is rebuilt:
//
//	fence = epoch<<40 | revision
//
// with 0 <= epoch <= MaxEpoch (2^23-1) and 1 <= revision <= MaxRevision
// (2^40-1, a thousand writes a second for 34 years); a revision above
// MaxRevision is refused with ErrFenceOverflow rather than wrapped. Every
// fence of epoch e+1 is above every fence of epoch e. Bump the epoch on
// every client together with the switch to the new cluster: a client left
// on the old epoch against the new cluster gets low fences and is refused
// (closed, not open); Options.ClusterID, when set, refuses a cluster other
// than the one the epoch belongs to before anything is admitted.
//
// # Losing the lock
//
// The lock lasts as long as the session's lease. Lock.Done is closed when
// the session stops being kept alive (expired, revoked, orphaned): from then
// on another holder may be granted the lock, and the holder should stop. It
// need not win that race: a write that still reaches the database after the
// successor was granted is refused by the floor the successor admitted.
package etcdfence
