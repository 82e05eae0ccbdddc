package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
	"github.com/fencegate/fencegate/sqlstore"
)

// wallClock is a holder clock that reads the machine's wall clock, so that
// its instants can be put next to the database's timestamps: the test's
// databases run on this machine and read the same clock. Only a test may do
// this; a real holder cannot know how its clock relates to the database's,
// which is why clock.Instant and clock.DBTime do not mix.
type wallClock struct{ origin time.Time }

func (c wallClock) Now() clock.Instant { return at(time.Now().Round(0).Sub(c.origin)) }

func (c wallClock) wall(i clock.Instant) time.Time { return c.origin.Add(i.Sub(clock.Instant{})) }

// Over hundreds of round trips with random delays before and after the
// coordinator (acquisitions, retried acquisitions and renewals), the holder's
// deadline never passes the coordinator's expiry. Dating the lease from the
// reply's arrival instead would, which the test checks too, so that it is
// known to have teeth.
func TestHolderDeadlineNeverExceedsCoordinatorExpiry(t *testing.T) {
	forEachStore(t, func(t *testing.T, store sqlstore.Store) {
		ctx := context.Background()
		seed := time.Now().UnixNano()
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		t.Logf("seed %d", seed)

		clk := wallClock{origin: time.Now().Round(0)}
		c, err := NewClient(&ClientOptions{Holder: "agent-a", Clock: clk, TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		coord := NewCoordinator(store, nil)
		requireSharedClock(t, c, coord)

		// network simulates one leg of a round trip: 0 to 3ms, sometimes none.
		network := func() {
			if rng.IntN(4) > 0 {
				time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
			}
		}
		var trips, arrivalViolations int
		minMargin := time.Duration(1<<63 - 1)
		check := func(what string, l *Lease, g Grant, arrival clock.Instant) {
			t.Helper()
			trips++
			deadline := clk.wall(l.Deadline())
			expiry := g.CoordinatorExpiresAt.Time()
			if deadline.After(expiry) {
				t.Errorf("%s: the holder's deadline %v is %v after the coordinator's expiry %v",
					what, deadline.Format(time.StampMicro), deadline.Sub(expiry), expiry.Format(time.StampMicro))
			}
			minMargin = min(minMargin, expiry.Sub(deadline))
			if clk.wall(arrival.Add(g.TTL)).After(expiry) {
				arrivalViolations++
			}
		}

		for i := 0; trips < 240; i++ {
			resource := fmt.Sprintf("slot-%d", i)
			req, _ := c.BeginAcquire(resource)
			network()
			out, err := coord.Acquire(ctx, req)
			if err != nil || !out.OK {
				t.Fatalf("Acquire = %+v, %v", out, err)
			}
			if rng.IntN(3) == 0 {
				// The reply is lost; the holder sends the request again.
				network()
				out, err = coord.Acquire(ctx, req)
				if err != nil || !out.OK {
					t.Fatalf("retried Acquire = %+v, %v", out, err)
				}
			}
			network()
			arrival := clk.Now()
			l, err := c.CompleteAcquire(req, out.Grant)
			if err != nil {
				t.Fatal(err)
			}
			check("acquire "+resource, l, out.Grant, arrival)

			for range 4 {
				rreq, _ := c.BeginRenewal(l)
				network()
				rout, err := coord.Renew(ctx, rreq)
				if err != nil || !rout.OK {
					t.Fatalf("Renew = %+v, %v", rout, err)
				}
				network()
				arrival := clk.Now()
				if _, err := c.CompleteRenewal(rreq, rout.Grant); err != nil {
					t.Fatal(err)
				}
				check("renew "+resource, l, rout.Grant, arrival)
			}
			token, _ := c.Release(l)
			if _, err := coord.Release(ctx, token); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%d round trips; smallest margin between the holder's deadline and the coordinator's expiry %v; "+
			"anchoring at the reply's arrival would have overrun %d times", trips, minMargin, arrivalViolations)
		if arrivalViolations == 0 {
			t.Error("anchoring at arrival never overran: the delays are too small for this test to tell the two apart")
		}
	})
}

// requireSharedClock skips the test when the database's clock is visibly not
// this machine's (Postgres in a VM, say), since the test compares the two
// directly. It brackets the database's reading between two local ones.
func requireSharedClock(t *testing.T, c *Client, coord *Coordinator) {
	t.Helper()
	acquire(t, c, coord, "clock-probe")
	var lo, hi time.Duration // the database's clock minus this machine's lies in [lo, hi]
	for i := range 10 {
		before := time.Now()
		st, err := coord.Status(context.Background(), "clock-probe")
		after := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		l, h := st.Now.Time().Sub(after), st.Now.Time().Sub(before)
		if i == 0 || h-l < hi-lo {
			lo, hi = l, h
		}
	}
	if lo > 2*time.Millisecond || hi < -2*time.Millisecond {
		t.Skipf("the database's clock is %v to %v off this machine's; this test needs them to be one clock", lo, hi)
	}
}
