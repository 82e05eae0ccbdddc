package lease

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencegate/fencegate/clock"
)

// stallingClock is the system clock, except that while armed each reading
// is followed by a stall: a preemption right after the clock was read.
type stallingClock struct{ armed atomic.Bool }

func (c *stallingClock) Now() clock.Instant {
	now := clock.System().Now()
	if c.armed.Load() {
		time.Sleep(200 * time.Millisecond)
	}
	return now
}

// Keep dates a lease's first renewal from a reading of the process clock
// taken before the lease's remaining time: a stall between the two makes
// the renewal early, never late. (Read the other way round, a 200ms stall
// after reading the lease pushed the renewal 200ms past its due time.)
func TestKeepDatesTheFirstRenewalBeforeReadingTheLease(t *testing.T) {
	clk := &stallingClock{}
	c := newClient(t, "h", ClientOptions{Clock: clk, ClockSkew: 600 * time.Millisecond})
	req, err := c.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	// 400ms left of a 1s term: less than two thirds, so due at once (and
	// no jitter).
	l, err := c.CompleteAcquire(req, Grant{Resource: "r", Holder: "h", Fence: 1, RequestID: req.RequestID, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := &keeper{running: true} // no loop: only add's arithmetic is under test
	e := &kept{l: l}
	start := time.Now()
	clk.armed.Store(true)
	k.add(e)
	clk.armed.Store(false)
	if late := e.renewAt.Sub(start); late > 100*time.Millisecond {
		t.Fatalf("the first renewal is due %v after add began, want at once: dated from after the lease was read", late)
	}
}
