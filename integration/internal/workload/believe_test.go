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
	c, err := lease.NewClient(lease.ClientOptions{Holder: "h", TTL: time.Second, ClockSkew: 500 * time.Millisecond})
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
	if got := believedUntil(l); got > now-int64(400*time.Millisecond) {
		t.Fatalf("believed until %v after the reading before it, want about -500ms (the deadline)", time.Duration(got-now))
	}
}
