package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/sqlstore"
)

// 16 goroutines race to acquire one resource, over and over; holders release
// it or abandon it to expire. Every grant must have a unique fence, fences
// must rise with the grant times, no lease may be taken over before it
// expired or was released, and every denial must name the holder the
// denied fence was granted to.
func TestSixteenRacersOneHolderPerGeneration(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		const (
			racers   = 16
			grants   = 64
			ttl      = 40 * time.Millisecond
			resource = "contended"
		)
		ctx := context.Background()
		coord := NewCoordinator(store, &CoordinatorOptions{TTL: ttl})

		type grantRec struct {
			holder    string
			fence     int64
			expiresAt time.Time
			released  bool
		}
		type observation struct {
			fence   int64
			granted bool
		}
		type denial struct {
			by          string
			heldBy      string
			fence       int64
			alreadyHeld bool
		}
		var (
			mu       sync.Mutex
			log      []grantRec
			denials  []denial
			issued   atomic.Int64
			busy     atomic.Int64
			observed = make([][]observation, racers)
		)

		var wg sync.WaitGroup
		for i := range racers {
			holder := fmt.Sprintf("racer-%02d", i)
			c := newClient(t, holder, ClientOptions{})
			rng := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
			wg.Go(func() {
				for issued.Load() < grants {
					req, _ := c.BeginAcquire(resource)
					out, err := coord.Acquire(ctx, req)
					if errors.Is(err, ErrBusy) {
						busy.Add(1)
						continue
					}
					if err != nil {
						t.Errorf("%s: Acquire: %v", holder, err)
						return
					}
					if !out.OK {
						observed[i] = append(observed[i], observation{fence: out.Fence})
						mu.Lock()
						denials = append(denials, denial{holder, out.HeldBy, out.Fence, out.AlreadyHeld})
						mu.Unlock()
						// Back off a little, to spare the database, not
						// to synchronise: correctness does not depend on it.
						time.Sleep(time.Duration(rng.Int64N(int64(time.Millisecond))))
						continue
					}
					l, err := c.CompleteAcquire(req, out.Grant)
					if err != nil {
						t.Errorf("%s: CompleteAcquire: %v", holder, err)
						return
					}
					observed[i] = append(observed[i], observation{fence: out.Grant.Fence, granted: true})
					issued.Add(1)
					rec := grantRec{holder: holder, fence: out.Grant.Fence, expiresAt: out.Grant.CoordinatorExpiresAt.Time()}
					if rng.IntN(4) > 0 { // most release; the rest let it expire
						token, _ := c.Release(l)
						ok, err := coord.Release(ctx, token)
						if err != nil && !errors.Is(err, ErrBusy) {
							t.Errorf("%s: Release: %v", holder, err)
						}
						// false when this goroutine was slower than the
						// ttl: then the lease expired instead.
						rec.released = ok
					}
					mu.Lock()
					log = append(log, rec)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		// Every grant's fence is unique: one holder per generation.
		byFence := map[int64]grantRec{}
		for _, g := range log {
			if prev, dup := byFence[g.fence]; dup {
				t.Fatalf("fence %d granted twice: to %s and to %s", g.fence, prev.holder, g.holder)
			}
			byFence[g.fence] = g
		}
		// In fence order, grants are in time order, and a lease nobody
		// released was not taken over before it expired. A grant's time is
		// its expiry less the term.
		slices.SortFunc(log, func(a, b grantRec) int { return cmp.Compare(a.fence, b.fence) })
		for i := 1; i < len(log); i++ {
			prev, cur := log[i-1], log[i]
			grantedAt := cur.expiresAt.Add(-ttl)
			if grantedAt.Before(prev.expiresAt.Add(-ttl)) {
				t.Errorf("fence %d granted at %v, before fence %d at %v", cur.fence, grantedAt, prev.fence, prev.expiresAt.Add(-ttl))
			}
			if !prev.released && grantedAt.Before(prev.expiresAt) {
				t.Errorf("fence %d (%s) granted at %v while fence %d (%s) was live until %v",
					cur.fence, cur.holder, grantedAt, prev.fence, prev.holder, prev.expiresAt)
			}
		}
		// Each racer saw fences rise, and each of its grants was above
		// everything it had seen.
		for i, obs := range observed {
			var highest int64
			for _, o := range obs {
				if o.fence < highest || (o.granted && o.fence == highest) {
					t.Errorf("racer %d saw fence %d (granted %v) after fence %d", i, o.fence, o.granted, highest)
				}
				highest = max(highest, o.fence)
			}
		}
		// Every denial names the holder its fence was granted to.
		for _, d := range denials {
			g, ok := byFence[d.fence]
			if !ok || g.holder != d.heldBy || d.alreadyHeld != (d.by == d.heldBy) {
				t.Errorf("%s was denied by %s holding fence %d (already held %v), but that fence went to %q",
					d.by, d.heldBy, d.fence, d.alreadyHeld, g.holder)
			}
		}
		// The gate's floor followed every grant.
		top := log[len(log)-1]
		if f := floorOf(t, store, resource); f.Floor != top.fence || f.Holder != top.holder {
			t.Errorf("floor %+v, want the last grant %d to %s", f, top.fence, top.holder)
		}
		var abandoned, alreadyHeld int
		for _, g := range log {
			if !g.released {
				abandoned++
			}
		}
		for _, d := range denials {
			if d.alreadyHeld {
				alreadyHeld++
			}
		}
		t.Logf("%d grants (%d left to expire), %d denials (%d to the holder itself), %d busy; fences %d..%d",
			len(log), abandoned, len(denials), alreadyHeld, busy.Load(), log[0].fence, top.fence)
	})
}
