package workload

import (
	"testing"
	"time"

	"github.com/fencegate/fencegate/integration/internal/history"
	"github.com/fencegate/fencegate/lease"
)

// A holder whose deadline has passed when its belief is recorded (a worker
// stopped between the grant and the record) believed until that deadline,
// not until the moment it woke: the recorded deadline must not move up to
// the reading, as it would through Lease.Remaining, which stops at zero.
func TestBelievedUntilIsTheDeadlineEvenWhenPast(t *testing.T) {
	clk := newHolderClock()
	c, err := lease.NewClient(&lease.ClientOptions{Holder: "h", TTL: time.Second, ClockSkew: 500 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	// A grant with no time left: the deadline is the send instant less the
	// clock skew, half a second ago.
	l, err := c.CompleteAcquire(req, lease.Grant{Resource: "r", Holder: "h", Fence: 1, RequestID: req.RequestID})
	if err != nil {
		t.Fatal(err)
	}
	now := history.Now()
	if got := believedUntil(l, clk); got > now-int64(400*time.Millisecond) {
		t.Fatalf("believed until %v after the reading before it, want about -500ms (the deadline)", time.Duration(got-now))
	}
}

// The deadline is carried to the wall clock from one reading of both: with
// a clock that moves 10ms between any two readings (a preemption each
// time), it still lands exactly where the deadline is. Read in two calls,
// it would land 10ms late.
func TestBelievedUntilReadsTheClocksOnce(t *testing.T) {
	origin := time.Unix(1_000_000, 0)
	fake := origin
	clk := holderClock{now: func() time.Time {
		fake = fake.Add(10 * time.Millisecond)
		return fake
	}}
	c, err := lease.NewClient(&lease.ClientOptions{Holder: "h", TTL: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.BeginAcquire("r")
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.CompleteAcquire(req, lease.Grant{Resource: "r", Holder: "h", Fence: 1, RequestID: req.RequestID, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := origin.UnixNano() + int64(l.Deadline().Sub(clk.at(origin)))
	if got := believedUntil(l, clk); got != want {
		t.Fatalf("believed until %v off the deadline on the wall clock", time.Duration(got-want))
	}
}
