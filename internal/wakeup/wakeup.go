// Package wakeup wakes the clients of a lease Coordinator that poll the
// database (an election's observers, a semaphore's head of the line)
// sooner than their next look, when the store announces a release.
package wakeup

import (
	"context"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// retry is the pause before listening again after the listener ended.
const retry = 100 * time.Millisecond

// Listen pokes wake at each announcement of a resource match accepts, and
// each time it starts listening, until ctx ends. It listens as a watcher of
// w: the listener has no waiter row for those resources, without which
// their releases are not announced. Call it only on a store that
// SupportsListener.
func Listen(ctx context.Context, store sqlstore.Store, w sqlstore.Watch, match func(string) bool, wake chan struct{}) {
	for ctx.Err() == nil {
		_ = store.WatchLeases(ctx, w, func() { Poke(wake) }, func(ch sqlstore.LeaseChange) {
			if match(ch.Resource) {
				Poke(wake)
			}
		})
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Poke wakes wake's receiver without blocking: wake has room for one wake-up,
// and one pending is as good as many.
func Poke(wake chan struct{}) {
	select {
	case wake <- struct{}{}:
	default:
	}
}
